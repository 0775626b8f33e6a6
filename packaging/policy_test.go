package packaging_test

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// The .deb follows Debian's conventions and never fails the transaction:
// policy-rc.d (101) is honoured on install and on upgrade; remove and
// reinstall keep the operator's enable choice (deb-systemd-helper); a port
// already taken at install, or a worker that cannot come back during an
// upgrade, is a warning naming it, dpkg exits 0 and `dpkg --audit` is clean.
func TestDebPolicyAndFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building packages takes tens of seconds")
	}
	dir := t.TempDir()
	debs := map[string]string{}
	for _, v := range []string{"3.0.0", "3.0.1"} {
		out := filepath.Join(dir, v)
		cmd := exec.Command("make", "-s", "deb", "VERSION="+v, "BIN="+out+"/bin", "DIST="+out+"/dist")
		cmd.Dir = repoRoot
		if got, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make deb VERSION=%s: %v\n%s", v, err, got)
		}
		debs[v] = filepath.Join(out, "dist", "clusterapp_"+v+"-1_amd64.deb")
	}
	b := sandbox.New(t, sandbox.Options{Bare: true})
	b.Copy(debs["3.0.0"], "/tmp/v1.deb")
	b.Copy(debs["3.0.1"], "/tmp/v2.deb")
	b.Copy(sandbox.Bin("clusterapp"), "/usr/local/bin/squatter")
	dpkg := func(what string, args ...string) string {
		t.Helper()
		out, err := b.Run("sh", "-c", "dpkg "+strings.Join(args, " ")+" </dev/null 2>&1")
		if err != nil {
			t.Fatalf("%s: dpkg %v failed: %v\n%s", what, args, err, out)
		}
		if audit, _ := b.Run("dpkg", "--audit"); strings.TrimSpace(audit) != "" {
			t.Errorf("%s: dpkg --audit:\n%s", what, audit)
		}
		return out
	}
	state := func(prop, unit string) string { return strings.TrimSpace(b.Show(unit, prop)) }
	enabled := func(unit string) string {
		out, _ := b.Run("systemctl", "is-enabled", unit)
		return strings.TrimSpace(out)
	}

	// policy-rc.d forbids starting services (an image build): the install enables, starts nothing.
	b.WriteFile("/usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n")
	b.Must("chmod", "755", "/usr/sbin/policy-rc.d")
	dpkg("install under policy-rc.d 101", "-i", "/tmp/v1.deb")
	if s := state("ActiveState", config.SocketUnit); s != "inactive" {
		t.Errorf("install under policy-rc.d 101 started clusterapp.socket (%s)", s)
	}
	if e := enabled(config.SocketUnit); e != "enabled" {
		t.Errorf("after install clusterapp.socket is %q, want enabled", e)
	}

	// ... and on upgrade: the running workers are not restarted.
	b.Must("systemctl", "start", config.SocketUnit, config.MetricsSocketUnit)
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 ") {
		t.Fatalf("first request: %q %v", out, err)
	}
	pid := b.MainPID(config.WorkerUnit(1))
	dpkg("upgrade under policy-rc.d 101", "-i", "/tmp/v2.deb")
	if got := b.MainPID(config.WorkerUnit(1)); got != pid {
		t.Errorf("upgrade under policy-rc.d 101 restarted worker 1 (pid %d -> %d)", pid, got)
	}

	// Remove and reinstall keep the operator's choice, disabled or enabled.
	for _, choice := range []string{"disable", "enable"} {
		b.Must("systemctl", choice, config.SocketUnit)
		dpkg("remove", "-r", "clusterapp")
		dpkg("reinstall", "-i", "/tmp/v2.deb")
		if e, want := enabled(config.SocketUnit), choice+"d"; e != want {
			t.Errorf("after %s, remove and reinstall, clusterapp.socket is %q, want %q", choice, e, want)
		}
	}

	// The port is taken at a first install: a warning naming the socket, the package configured.
	// Purged, not removed: after a remove dpkg passes the old version to the postinst, which is
	// then an upgrade, and the scripts before this test started nothing there (nor failed).
	b.Must("rm", "-f", "/usr/sbin/policy-rc.d")
	dpkg("purge", "-P", "clusterapp")
	b.Must("systemd-run", "--unit=squatter", "-E", "CLUSTERAPP_LISTEN=127.0.0.1:8080", "-E", "CLUSTERAPP_METRICS_LISTEN=127.0.0.1:9999",
		"/usr/local/bin/squatter", "serve", "--instance=squatter")
	b.Eventually(10*time.Second, "the squatter on 127.0.0.1:8080", func() bool {
		_, err := b.Run("curl", "-sf", "-o", "/dev/null", "http://127.0.0.1:8080/healthz")
		return err == nil
	})
	out := dpkg("install with port 8080 taken", "-i", "/tmp/v1.deb")
	if !strings.Contains(out, "clusterapp.socket did not start") {
		t.Errorf("install with the port taken does not warn about clusterapp.socket:\n%s", out)
	}
	b.Must("systemctl", "stop", "squatter")
	b.Must("systemctl", "start", config.SocketUnit)
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 ") {
		t.Fatalf("request once the port is free: %q %v", out, err)
	}

	// A worker that cannot come back during the upgrade: warned about by name, dpkg exits 0.
	workers := b.WorkerUnits(2)
	b.Eventually(10*time.Second, "both workers", func() bool { return b.AllActive(workers...) })
	b.WriteFile("/etc/systemd/system/"+config.WorkerUnit(2)+".d/broken.conf", "[Service]\nExecStartPre=/bin/false\n")
	b.Must("systemctl", "daemon-reload")
	out = dpkg("upgrade with a worker that cannot start", "-i", "/tmp/v2.deb")
	if !strings.Contains(out, config.WorkerUnit(2)) || !strings.Contains(out, "warning: the rolling restart stopped") {
		t.Errorf("the upgrade does not name the worker that did not come back:\n%s", out)
	}
	if v := b.Must("dpkg-query", "-W", "-f=${Status} ${Version}", "clusterapp"); v != "install ok installed 3.0.1-1" {
		t.Errorf("after the upgrade: %q", v)
	}
	if n, _ := strconv.Atoi(b.Show(config.WorkerUnit(1), "MainPID")); n == 0 {
		t.Errorf("worker 1 is not running after the upgrade")
	}
}
