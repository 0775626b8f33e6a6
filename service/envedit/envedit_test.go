package envedit

import (
	"os"
	"path/filepath"
	"testing"

	"strings"

	"github.com/clusterapp/clusterapp/service/config"
)

func TestSet(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty file", "", "CLUSTERAPP_WORKERS=3\n"},
		{"replaces in place, keeps the rest",
			"# pool\nCLUSTERAPP_WORKERS=2\nCLUSTERAPP_BACKLOG=512\n",
			"# pool\nCLUSTERAPP_WORKERS=3\nCLUSTERAPP_BACKLOG=512\n"},
		{"last assignment wins, as in systemd",
			"CLUSTERAPP_WORKERS=1\n; note\n  CLUSTERAPP_WORKERS = 2\n",
			"CLUSTERAPP_WORKERS=1\n; note\nCLUSTERAPP_WORKERS=3\n"},
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
		vars, err := config.ParseEnvFile(strings.NewReader(got))
		if err != nil || vars["CLUSTERAPP_WORKERS"] != "3" {
			t.Errorf("%s: the result parses as %v, %v", tc.name, vars, err)
		}
	}
}

func TestSetRefuses(t *testing.T) {
	if _, err := Set("CLUSTERAPP_WORKERS=1\\\n2\n", "CLUSTERAPP_WORKERS", "3"); err == nil {
		t.Error("continued line rewritten")
	}
	if _, err := Set("", "K", "a b"); err == nil {
		t.Error("value needing quotes written unquoted")
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
