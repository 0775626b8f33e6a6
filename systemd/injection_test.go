package systemd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// The reproduction of issue 11, point 2: a line systemd skips (`export`)
// made the generator drop the whole file, moving the socket to *:8080 and
// starting one worker per CPU while the workers ran with the file. Now the
// generator skips that line as systemd does, with a note in the journal.
func TestEnvFileLineSystemdSkipsIsSkipped(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_LISTEN=127.0.0.1:29000\nCLUSTERAPP_WORKERS=1\nexport GODEBUG=madvdontneed=1\n"})
	if listen := b.Show(config.SocketUnit, "Listen"); listen != "127.0.0.1:29000 (Stream)" {
		t.Fatalf("clusterapp.socket listens on %q, want only 127.0.0.1:29000", listen)
	}
	if wants := b.Show(config.TargetUnit, "Wants"); strings.Count(wants, "clusterapp-worker@") != 1 {
		t.Fatalf("clusterapp.target wants %q, want one worker", wants)
	}
	b.Must("systemctl", "start", config.SocketUnit)
	out := b.Must("curl", "-sS", "--max-time", "30", "-o", "/dev/null", "-w", "%{http_code} %header{x-worker}", "http://127.0.0.1:29000/")
	if out != "200 1" {
		t.Fatalf("request to 127.0.0.1:29000: %q", out)
	}
	note := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-t", "clusterapp-generator")
	if !strings.Contains(note, "line 3: systemd skips this line: `export` is shell syntax") {
		t.Fatalf("the generator did not say which line it skipped:\n%s", note)
	}
}

// The reproduction of issue 11, point 3: carriage returns in
// CLUSTERAPP_LISTEN made systemd read an ExecStartPre= that ran as root.
// Now the value is refused, nothing runs, no directive appears, the socket
// listens nowhere (it fails closed, never on the shipped *:8080), and the
// journal says why.
func TestListenInjectionFailsClosed(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_LISTEN=\"29001\rExecStartPre=/bin/sh -c 'id > /tmp/x'\rListenStream=127.0.0.1:29000\"\n"})
	_, startErr := b.Run("systemctl", "start", config.SocketUnit)
	time.Sleep(500 * time.Millisecond) // anything injected would have run by now
	if _, err := b.Run("test", "-e", "/tmp/x"); err == nil {
		t.Fatal("/tmp/x exists: the injected command ran")
	}
	if startErr == nil {
		t.Fatal("clusterapp.socket started although its listen address is invalid")
	}
	unit := b.Must("systemctl", "cat", config.SocketUnit)
	if strings.Contains(unit, "ExecStartPre") || strings.Contains(unit, "29000") || strings.Contains(unit, "29001") {
		t.Fatalf("the operator's value reached the unit:\n%s", unit)
	}
	if listen := b.Show(config.SocketUnit, "Listen"); listen != "" {
		t.Fatalf("clusterapp.socket listens on %q; it must listen nowhere", listen)
	}
	ss := b.Must("ss", "-Htln")
	for _, port := range []string{":8080", ":29000", ":29001"} {
		if strings.Contains(ss, port+" ") {
			t.Fatalf("something listens on %s:\n%s", port, ss)
		}
	}
	why := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-t", "clusterapp-generator", "-p", "warning")
	if !strings.Contains(why, `CLUSTERAPP_LISTEN="29001\rExecStartPre`) || !strings.Contains(why, "clusterapp.socket will not listen anywhere until it is fixed") {
		t.Fatalf("the journal does not say why the socket is down:\n%s", why)
	}
	// Fixing the file heals it.
	b.WriteEnv("CLUSTERAPP_LISTEN=127.0.0.1:29000\n")
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "start", config.SocketUnit)
	if listen := b.Show(config.SocketUnit, "Listen"); listen != "127.0.0.1:29000 (Stream)" {
		t.Fatalf("after the fix clusterapp.socket listens on %q", listen)
	}
}

// The reproduction of issue 11, point 6: CLUSTERAPP_INSTANCE in the
// environment file overrode %i for every worker (EnvironmentFile= wins over
// Environment=): one X-Worker for all, and balancing off. The name now
// comes from the unit's command line; the variable is ignored with a
// warning.
func TestEnvFileCannotRenameWorkers(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_INSTANCE=evil\n"})
	b.Start(2)
	res := b.Load("/", "-c", "16", "-d", "2s")
	if res.Errors() != 0 || len(res.ByHeader) != 2 || res.ByHeader["1"] == 0 || res.ByHeader["2"] == 0 {
		t.Fatalf("requests by X-Worker %v (errors %d), want workers 1 and 2 only", res.ByHeader, res.Errors())
	}
	j := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", config.WorkerUnit(1))
	if !strings.Contains(j, "CLUSTERAPP_INSTANCE is not read") || strings.Contains(j, "balancing off") {
		t.Fatalf("worker 1's journal:\n%s", j)
	}
}

// A setting's name without the prefix in the environment file reaches the
// workers' environment through systemd, and the configuration library
// clusterapp uses reads such names when the prefixed one is unset: the
// fault-injection routes came on with DEBUG_ENDPOINTS=true, and
// LOG_LEVEL=bogus stopped the workers (an invalid setting). Only
// CLUSTERAPP_* names are settings; the others are named in the journal.
func TestEnvFileBareNamesAreNotSettings(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\nDEBUG_ENDPOINTS=true\nWORKERS=3\nLOG_LEVEL=bogus\n"})
	b.Start(1)
	if got, err := b.Curl("/debug/crash"); err != nil || !strings.HasPrefix(got, "404 ") {
		t.Fatalf("/debug/crash answered %q (%v), want 404: DEBUG_ENDPOINTS= was read as CLUSTERAPP_DEBUG_ENDPOINTS", got, err)
	}
	if active := b.ActiveWorkers(); len(active) != 1 {
		t.Fatalf("active workers %v, want one: WORKERS= was read as CLUSTERAPP_WORKERS", active)
	}
	j := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", config.WorkerUnit(1))
	for _, want := range []string{"DEBUG_ENDPOINTS is not read: the setting is CLUSTERAPP_DEBUG_ENDPOINTS", "WORKERS is not read"} {
		if !strings.Contains(j, want) {
			t.Errorf("worker 1's journal does not say %q:\n%s", want, j)
		}
	}
	if strings.Contains(j, "bogus\" is invalid") {
		t.Errorf("worker 1 read LOG_LEVEL=bogus as its log level:\n%s", j)
	}
}
