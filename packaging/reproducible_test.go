package packaging_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Two `make package` runs of one commit, at different times and in different
// directories, give byte-identical packages: every timestamp is the commit's
// (SOURCE_DATE_EPOCH, defaulted by the Makefile), nothing depends on the
// build directory (-trimpath).
func TestPackagesAreReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building packages takes tens of seconds")
	}
	sums := map[string]string{}
	for _, run := range []string{"a", "b"} {
		out := filepath.Join(t.TempDir(), run)
		cmd := exec.Command("make", "-s", "package", "VERSION=9.9.9", "BIN="+out+"/bin", "DIST="+out+"/dist")
		cmd.Dir = repoRoot
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SOURCE_DATE_EPOCH=") }) // the Makefile's default
		if got, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make package: %v\n%s", err, got)
		}
		for _, f := range []string{"clusterapp_9.9.9-1_amd64.deb", "clusterapp-9.9.9-1.x86_64.rpm"} {
			b, err := os.ReadFile(filepath.Join(out, "dist", f))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			if prev, ok := sums[f]; ok && prev != hex.EncodeToString(sum[:]) {
				t.Errorf("%s differs between two builds of one commit", f)
			}
			sums[f] = hex.EncodeToString(sum[:])
		}
	}
}
