package packaging_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// Every Go module statically linked into the shipped binary is listed, with
// its license, in the copyright file the packages carry.
func TestCopyrightListsLinkedModules(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "clusterapp")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/clusterapp")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	copyright, err := os.ReadFile(filepath.Join(repoRoot, "packaging/files/copyright"))
	if err != nil {
		t.Fatal(err)
	}
	deps := regexp.MustCompile(`(?m)^\s+dep\s+(\S+)\s`).FindAllStringSubmatch(string(info), -1)
	if len(deps) == 0 {
		t.Fatalf("no dep lines in go version -m:\n%s", info)
	}
	for _, d := range deps {
		line := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(d[1]) + `\s+(\S+)$`).FindStringSubmatch(string(copyright))
		if line == nil || !slices.Contains([]string{"MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause"}, line[1]) {
			t.Errorf("packaging/files/copyright does not list %s with its license", d[1])
		}
	}
}
