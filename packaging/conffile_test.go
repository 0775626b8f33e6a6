package packaging_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// An unattended upgrade never stops at a conffile prompt: install v1, the
// operator edits /etc/clusterapp/clusterapp.env and scales the pool, then
// v2, whose commented template changed, installs non-interactively (stdin
// closed, no --force-conf* option: dpkg fails at any prompt). The operator's
// edits and the scaled count are kept; the new template is in the docs.
func TestUpgradeNeverPromptsForTheEnvFile(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building packages takes tens of seconds")
	}
	dir := t.TempDir()
	debs := map[string]string{}
	for v, extra := range map[string]string{"2.0.0": "", "2.0.1": "# CLUSTERAPP_SOMETHING_NEW: a variable a later release documents"} {
		out := filepath.Join(dir, v)
		cmd := exec.Command("make", "-s", "deb", "VERSION="+v, "BIN="+out+"/bin", "DIST="+out+"/dist")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "PKG_TEMPLATE_EXTRA="+extra)
		if got, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make deb VERSION=%s: %v\n%s", v, err, got)
		}
		debs[v] = filepath.Join(out, "dist", "clusterapp_"+v+"-1_amd64.deb")
	}
	b := sandbox.New(t, sandbox.Options{Bare: true})
	b.Copy(debs["2.0.0"], "/tmp/v1.deb")
	b.Copy(debs["2.0.1"], "/tmp/v2.deb")
	b.Must("rm", "-f", "/usr/sbin/policy-rc.d") // the box's copy: the install starts the socket
	b.Must("dpkg", "-i", "/tmp/v1.deb")
	b.Must("sh", "-c", "echo CLUSTERAPP_MAX_BODY_BYTES=2048 >> "+config.EnvFile)
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 ") {
		t.Fatalf("first request: %q %v", out, err)
	}
	b.Must("clusterapp", "scale", "3")

	if out, err := b.Run("sh", "-c", "dpkg -i /tmp/v2.deb </dev/null 2>&1"); err != nil {
		t.Fatalf("non-interactive upgrade to a release whose template changed: %v\n%s", err, out)
	}
	if audit, _ := b.Run("dpkg", "--audit"); strings.TrimSpace(audit) != "" {
		t.Errorf("dpkg --audit after the upgrade:\n%s", audit)
	}
	if env := b.Must("cat", config.EnvFile); !strings.Contains(env, "CLUSTERAPP_MAX_BODY_BYTES=2048") {
		t.Errorf("the operator's edit is gone:\n%s", env)
	}
	if sc := b.Must("cat", "/etc/clusterapp/scale.env"); !strings.Contains(sc, "CLUSTERAPP_WORKERS=3") {
		t.Errorf("the scaled count is gone:\n%s", sc)
	}
	if wants := b.Show(config.TargetUnit, "Wants"); strings.Count(wants, "clusterapp-worker@") != 3 {
		t.Errorf("after the upgrade the target wants %q, want 3 workers", wants)
	}
	if tmpl := b.Must("cat", "/usr/share/doc/clusterapp/clusterapp.env.example"); !strings.Contains(tmpl, "CLUSTERAPP_SOMETHING_NEW") {
		t.Errorf("the new template is not installed as documentation")
	}
}
