package envedit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/clusterapp/clusterapp/service/config/envfile"
)

func TestSet(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty file", "", "CLUSTERAPP_WORKERS=3\n"},
		{"replaces in place, keeps the rest",
			"# pool\nCLUSTERAPP_WORKERS=2\nCLUSTERAPP_BACKLOG=512\n",
			"# pool\nCLUSTERAPP_WORKERS=3\nCLUSTERAPP_BACKLOG=512\n"},
		{"last assignment wins, as in systemd",
			"CLUSTERAPP_WORKERS=1\n; note\n  CLUSTERAPP_WORKERS = 2\n",
			"CLUSTERAPP_WORKERS=1\n; note\n  CLUSTERAPP_WORKERS=3\n"},
		{"after the commented template line",
			"# number of workers\n#CLUSTERAPP_WORKERS=0\n\n#CLUSTERAPP_WATCHDOG_SEC=10s\n",
			"# number of workers\n#CLUSTERAPP_WORKERS=0\nCLUSTERAPP_WORKERS=3\n\n#CLUSTERAPP_WATCHDOG_SEC=10s\n"},
		{"appended, missing final newline added",
			"CLUSTERAPP_BACKLOG=512", "CLUSTERAPP_BACKLOG=512\nCLUSTERAPP_WORKERS=3\n"},
		{"other keys with the same prefix untouched",
			"CLUSTERAPP_WORKERS_EXTRA=9\n", "CLUSTERAPP_WORKERS_EXTRA=9\nCLUSTERAPP_WORKERS=3\n"},
		{"no final newline on the replaced line", "CLUSTERAPP_WORKERS=2", "CLUSTERAPP_WORKERS=3"},
	} {
		got, err := Set(tc.in, "CLUSTERAPP_WORKERS", "3")
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
			continue
		}
		f, err := envfile.Parse([]byte(got))
		if err != nil || f.Vars()["CLUSTERAPP_WORKERS"] != "3" {
			t.Errorf("%s: the result parses as %v, %v", tc.name, f, err)
		}
	}
}

// The file is read as systemd reads it (issue 11): the assignment in effect
// is edited even when it continues over several lines, a line that only
// looks like an assignment because the line above continues into it is left
// alone, and values that need quoting are quoted.
func TestSetReadsLikeSystemd(t *testing.T) {
	for _, tc := range []struct{ name, in, key, value, want string }{
		{"continued assignment replaced whole", "CLUSTERAPP_WORKERS=1\\\n2\nB=1\n", "CLUSTERAPP_WORKERS", "3", "CLUSTERAPP_WORKERS=3\nB=1\n"},
		{"a continuation is not an assignment", "A=x\\\nCLUSTERAPP_WORKERS=2\n", "CLUSTERAPP_WORKERS", "3", "A=x\\\nCLUSTERAPP_WORKERS=2\nCLUSTERAPP_WORKERS=3\n"},
		{"quoted multi-line assignment replaced", "K=\"a\nb\"\nB=1\n", "K", "c", "K=c\nB=1\n"},
		{"value quoted", "", "K", "a b", "K=\"a b\"\n"},
		{"CRLF kept around the edit", "A=1\r\nK=2\r\n", "K", "3", "A=1\r\nK=3\r\n"},
	} {
		got, err := Set(tc.in, tc.key, tc.value)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestSetRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in, value, want string }{
		{"an open quote would swallow the new line", "A=\"open\n", "3", "no safe place"},
		{"a file systemd refuses", "A=\xff\n", "3", "systemd ignores the whole file"},
		{"a value no file can hold", "", "a\x00b", "NUL"},
	} {
		if _, err := Set(tc.in, "K", tc.value); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// SetFile edits the file a symbolic link points to, keeps its owner, group
// and mode, and leaves no temporary file.
func TestSetFileKeepsLinkOwnerAndMode(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.env")
	link := filepath.Join(dir, "clusterapp.env")
	if err := os.WriteFile(real, []byte("# mine\nCLUSTERAPP_WORKERS=2\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.env", link); err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 65534, 65534 // nobody: only root can give a file away
		if err := os.Chown(real, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := SetFile(link, "CLUSTERAPP_WORKERS", "5"); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(link); err != nil || target != "real.env" {
		t.Fatalf("the link was replaced: %q %v", target, err)
	}
	b, _ := os.ReadFile(real)
	st, _ := os.Stat(real)
	sys := st.Sys().(*syscall.Stat_t)
	if string(b) != "# mine\nCLUSTERAPP_WORKERS=5\n" || st.Mode().Perm() != 0o640 || int(sys.Uid) != uid || int(sys.Gid) != gid {
		t.Fatalf("got %q mode %v owner %d:%d", b, st.Mode().Perm(), sys.Uid, sys.Gid)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestSetFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etc", "clusterapp.env")
	if err := SetFile(path, "CLUSTERAPP_WORKERS", "2"); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := os.WriteFile(path, []byte("# mine\nCLUSTERAPP_WORKERS=2\n"), 0o600); err != nil || os.Chmod(path, 0o600) != nil {
		t.Fatal(err)
	}
	if err := SetFile(path, "CLUSTERAPP_WORKERS", "5"); err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	b, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	if string(b) != "# mine\nCLUSTERAPP_WORKERS=5\n" || st.Mode().Perm() != 0o600 {
		t.Fatalf("got %q mode %v", b, st.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A dangling symbolic link is written through like any link: the file it
// names is created and the link stays (it was replaced by a regular file,
// cutting the file loose from where the operator keeps it); relative links
// resolve from the link's directory, through further links.
func TestSetFileCreatesADanglingLinksTarget(t *testing.T) {
	for _, tc := range []struct{ name, link string }{
		{"absolute", ""}, {"relative", "../kept/scale.env"}, {"chain", "chain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			etc, kept := filepath.Join(root, "etc"), filepath.Join(root, "kept")
			for _, d := range []string{etc, kept} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			real, path := filepath.Join(kept, "scale.env"), filepath.Join(etc, "scale.env")
			switch tc.link {
			case "":
				mustSymlink(t, real, path)
			case "chain":
				mustSymlink(t, real, filepath.Join(kept, "next.env"))
				mustSymlink(t, "../kept/next.env", path)
			default:
				mustSymlink(t, tc.link, path)
			}
			if err := SetFile(path, "CLUSTERAPP_WORKERS", "3"); err != nil {
				t.Fatal(err)
			}
			if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("the link was replaced: %v, %v", st.Mode(), err)
			}
			if b, err := os.ReadFile(real); err != nil || string(b) != "CLUSTERAPP_WORKERS=3\n" {
				t.Fatalf("target: %q, %v", b, err)
			}
		})
	}
}

// What the link cannot be followed to is an error naming it, and nothing
// is written: a target in a directory that does not exist (an unmounted
// volume) is not created, nor is its directory; a loop of links.
func TestSetFileRefusesLinksItCannotFollow(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "mnt", "config", "scale.env")
	path := filepath.Join(dir, "scale.env")
	mustSymlink(t, missing, path)
	err := SetFile(path, "CLUSTERAPP_WORKERS", "3")
	if err == nil || !strings.Contains(err.Error(), path+" is a symbolic link to "+missing) {
		t.Fatalf("dangling into a missing directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "mnt")); err == nil {
		t.Fatal("the missing directory was created")
	}
	loop := filepath.Join(dir, "loop.env")
	mustSymlink(t, "loop.env", loop)
	if err := SetFile(loop, "CLUSTERAPP_WORKERS", "3"); err == nil || !strings.Contains(err.Error(), "too many levels of symbolic links") {
		t.Fatalf("a loop: %v", err)
	}
	for _, p := range []string{path, loop} {
		if st, err := os.Lstat(p); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link: %v", p, err)
		}
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
