package packaging_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// packaging/version maps `git describe` strings to versions dpkg and rpm both accept, ordered
// as the commits are.
func TestVersionMapping(t *testing.T) {
	for _, tc := range []struct{ describe, want string }{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v1.2.3-4-gabc1234", "1.2.3+git4.abc1234"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.3+git4.abc1234.dirty"},
		{"v1.2.3-rc1", "1.2.3~rc1"},
		{"v1.2.3-rc1-2-gabc1234", "1.2.3~rc1+git2.abc1234"},
		{"dev", "0.0.0~dev"},
	} {
		if got := version(t, tc.describe); got != tc.want {
			t.Errorf("version %q = %q, want %q", tc.describe, got, tc.want)
		}
	}
	if out, err := exec.Command(filepath.Join(repoRoot, "packaging", "version"), "not a version!").CombinedOutput(); err == nil {
		t.Errorf("an invalid describe string was accepted: %s", out)
	}
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("dpkg is not installed: ordering not checked")
	}
	// Each later build sorts after the earlier one.
	order := []string{"v1.2.3-rc1", "v1.2.3-rc1-2-gabc1234", "v1.2.3", "v1.2.3-4-gabc1234", "v1.2.3-4-gabc1234-dirty", "v1.2.4"}
	for i := 1; i < len(order); i++ {
		a, b := version(t, order[i-1]), version(t, order[i])
		if err := exec.Command("dpkg", "--compare-versions", a, "lt", b).Run(); err != nil {
			t.Errorf("dpkg orders %s (%s) not before %s (%s)", a, order[i-1], b, order[i])
		}
	}
}

func version(t *testing.T, describe string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(repoRoot, "packaging", "version"), describe).CombinedOutput()
	if err != nil {
		t.Fatalf("packaging/version %s: %v\n%s", describe, err, out)
	}
	return strings.TrimSpace(string(out))
}
