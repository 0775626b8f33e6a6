// Package packaging_test builds clusterapp's .deb and .rpm the way `make package` does and
// checks them as an operator meets them: lintian and rpmlint, the files and scriptlets, and,
// under a real systemd in the sandbox (service/lab/sandbox), install, serve, sysctls and limits in
// effect, an upgrade under load that fails no request, remove and purge.
package packaging_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

var repoRoot string

func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	repoRoot = filepath.Dir(wd)
	sandbox.Main(m, repoRoot)
}

// The two builds the upgrade test moves between.
const (
	oldVersion = "1.0.0"
	newVersion = "1.0.1"
)

// builds holds the package files of each version.
type builds struct{ deb, rpm map[string]string }

// buildPackages runs `make package` for both versions into dir, exactly as an operator would
// (only BIN, DIST and VERSION point elsewhere, so the checkout's bin/ and dist/ are untouched).
func buildPackages(t *testing.T, dir string) builds {
	t.Helper()
	b := builds{deb: map[string]string{}, rpm: map[string]string{}}
	for _, v := range []string{oldVersion, newVersion} {
		start := time.Now()
		out := filepath.Join(dir, v)
		cmd := exec.Command("make", "-s", "package", "VERSION="+v, "BIN="+out+"/bin", "DIST="+out+"/dist")
		cmd.Dir = repoRoot
		if got, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make package VERSION=%s: %v\n%s", v, err, got)
		}
		b.deb[v] = filepath.Join(out, "dist", "clusterapp_"+v+"-1_amd64.deb")
		b.rpm[v] = filepath.Join(out, "dist", "clusterapp-"+v+"-1.x86_64.rpm")
		for _, f := range []string{b.deb[v], b.rpm[v]} {
			if _, err := os.Stat(f); err != nil {
				t.Fatalf("make package VERSION=%s did not build %s", v, f)
			}
		}
		t.Logf("make package VERSION=%s: %v", v, time.Since(start).Round(time.Millisecond))
	}
	return b
}

// TestPackages builds the packages once and runs every check on them in parallel.
func TestPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building packages takes tens of seconds")
	}
	pk := buildPackages(t, t.TempDir())
	t.Run("group", func(t *testing.T) {
		t.Run("Lintian", func(t *testing.T) { t.Parallel(); testLintian(t, pk.deb[newVersion]) })
		t.Run("Rpmlint", func(t *testing.T) { t.Parallel(); testRpmlint(t, pk.rpm[newVersion]) })
		t.Run("RPMContents", func(t *testing.T) { t.Parallel(); testRPMContents(t, pk.rpm[newVersion]) })
		t.Run("DebLifecycle", func(t *testing.T) { t.Parallel(); testDebLifecycle(t, pk) })
		t.Run("RPMInstallInBox", func(t *testing.T) { t.Parallel(); testRPMInstall(t, pk) })
	})
}

func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed (.ci/run installs it: apt-get install lintian rpm rpmlint)", name)
	}
}

// justified fails the test for every tag not named in packaging/README.md, where each
// remaining warning must be explained.
func justified(t *testing.T, tool string, tags []string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "packaging", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range tags {
		if !strings.Contains(string(readme), "`"+tag+"`") {
			t.Errorf("%s warning %s is not justified in packaging/README.md", tool, tag)
		}
	}
}

func testLintian(t *testing.T, deb string) {
	needTool(t, "lintian")
	out, _ := exec.Command("lintian", "--pedantic", "--allow-root", deb).CombinedOutput()
	t.Logf("lintian --pedantic:\n%s", out)
	var warnings []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) < 3:
		case f[0] == "E:":
			t.Errorf("lintian error: %s", line)
		case f[0] == "W:":
			warnings = append(warnings, f[2])
		}
	}
	justified(t, "lintian", warnings)
}

func testRpmlint(t *testing.T, rpm string) {
	needTool(t, "rpmlint")
	// Never plain rpmlint: see packaging/rpmlint (it would unpack into / as root).
	out, _ := exec.Command(filepath.Join(repoRoot, "packaging", "rpmlint"), rpm).CombinedOutput()
	t.Logf("rpmlint:\n%s", out)
	if !strings.Contains(string(out), " 0 errors") {
		t.Errorf("rpmlint reports errors")
	}
	var warnings []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[1] == "W:" {
			warnings = append(warnings, f[2])
		}
	}
	justified(t, "rpmlint", warnings)
}

// The .rpm carries the same files as the .deb, the env file is a noreplace config file, and
// its scriptlets are the shared maintainer scripts.
func testRPMContents(t *testing.T, rpm string) {
	needTool(t, "rpm")
	list := run(t, "rpm", "-qp", "--list", rpm)
	for _, f := range []string{
		"/usr/bin/clusterapp",
		"/usr/libexec/clusterapp-worker",
		"/usr/lib/systemd/system-generators/clusterapp-generator",
		"/usr/lib/systemd/system/" + config.SocketUnit,
		"/usr/lib/systemd/system/" + config.MetricsSocketUnit,
		"/usr/lib/systemd/system/clusterapp.service",
		"/usr/lib/systemd/catalog/clusterapp.catalog",
		"/usr/lib/systemd/system/" + config.WorkerTemplate,
		"/usr/lib/systemd/system/" + config.WorkerTemplate + ".d/10-limits.conf",
		"/usr/lib/systemd/system/" + config.TargetUnit,
		"/usr/lib/systemd/system/" + config.FirstTarget,
		"/usr/lib/sysctl.d/60-clusterapp.conf",
		config.EnvFile,
		"/etc/security/limits.d/clusterapp.conf",
		"/usr/share/doc/clusterapp/copyright",
	} {
		if !containsLine(list, f) {
			t.Errorf("rpm lacks %s:\n%s", f, list)
		}
	}
	configs := run(t, "rpm", "-qp", "--configfiles", rpm)
	if !containsLine(configs, config.EnvFile) {
		t.Errorf("clusterapp.env is not a config file:\n%s", configs)
	}
	scripts := run(t, "rpm", "-qp", "--scripts", rpm)
	for _, want := range []string{"postinstall scriptlet", "preuninstall scriptlet", "postuninstall scriptlet",
		"systemctl --no-reload preset $units", "clusterapp reload", "[ -d /run/systemd/system ]"} {
		if !strings.Contains(scripts, want) {
			t.Errorf("rpm scriptlets lack %q:\n%s", want, scripts)
		}
	}
	// Fedora's policy: nothing is started by the package, and nothing Debian-specific runs.
	for _, never := range []string{"systemctl start", "deb-systemd", "policy-rc.d"} {
		if strings.Contains(scripts, never) {
			t.Errorf("rpm scriptlets run %q:\n%s", never, scripts)
		}
	}
	for _, bin := range []string{"/usr/bin/clusterapp", "/usr/libexec/clusterapp-worker"} {
		if file := run(t, "sh", "-c", "rpm2cpio "+rpm+" | cpio -i --quiet --to-stdout "+bin+" | head -c 4 | od -An -c"); !strings.Contains(file, "E   L   F") {
			t.Errorf("%s in the rpm is not an ELF binary: %s", bin, file)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// openFiles returns the soft and hard "Max open files" of a /proc/PID/limits text.
func openFiles(t *testing.T, limits string) (soft, hard int) {
	t.Helper()
	for _, line := range strings.Split(limits, "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "Max open files") && len(f) >= 5 {
			soft, _ = strconv.Atoi(f[3])
			hard, _ = strconv.Atoi(f[4])
			return soft, hard
		}
	}
	t.Fatalf("no open-files line in:\n%s", limits)
	return 0, 0
}

// workerLimit returns the open-file limits of a worker's main process.
func workerLimit(b *sandbox.Box, t *testing.T, unit string) (soft, hard int) {
	t.Helper()
	return openFiles(t, b.Must("cat", fmt.Sprintf("/proc/%d/limits", b.MainPID(unit))))
}
