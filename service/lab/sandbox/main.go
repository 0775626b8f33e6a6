package sandbox

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

var (
	// srcRoot is a tree laid out like the repository (bin/, systemd/) that
	// scripts/sandbox installs from; skipReason is set when boxes cannot
	// run here.
	srcRoot    string
	skipReason string
	repoRoot   string
)

// M is what Main needs of a test binary's *testing.M.
type M interface{ Run() int }

// Main is a test binary's TestMain: it builds the binaries, runs the tests
// and exits. repo is the repository root.
func Main(m M, repo string) {
	flag.Parse()
	os.Exit(run(m, repo))
}

func run(m M, repo string) int {
	repoRoot = repo
	switch {
	case os.Geteuid() != 0:
		skipReason = "needs root to boot systemd in private namespaces (run as root, as CI does)"
	case !exists("/lib/systemd/systemd"):
		skipReason = "needs systemd installed (/lib/systemd/systemd)"
	case short():
		skipReason = "-short"
	}
	if skipReason != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "clusterapp-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srcRoot = dir
	for _, b := range []string{"clusterapp", "clusterapp-worker", "clusterapp-load", "clusterapp-hello"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", b), "./cmd/"+b)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b, err, out)
			return 1
		}
	}
	if err := os.Symlink(filepath.Join(repoRoot, "systemd"), filepath.Join(dir, "systemd")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// short reports whether the test binary runs with -test.short: what
// testing.Short says, read from the flag so that this package does not
// import testing (see the package comment).
func short() bool {
	f := flag.Lookup("test.short")
	return f != nil && f.Value.String() == "true"
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// Bin returns the path of a freshly built binary (clusterapp,
// clusterapp-worker, clusterapp-load, clusterapp-hello).
func Bin(name string) string { return filepath.Join(srcRoot, "bin", name) }
