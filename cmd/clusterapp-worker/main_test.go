package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/command"
)

// build compiles the command once per test that needs the process.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "clusterapp-worker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// proc is one run of the binary as worker 7, in a clean environment (no
// inherited CLUSTERAPP_*, LISTEN_FDS or NOTIFY_SOCKET) plus env.
type proc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer // read only once the process has ended
	done   chan error   // cmd.Wait's
}

func start(t *testing.T, bin string, env ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, "--instance", "7"), done: make(chan error, 1)}
	p.cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p
}

// kill ends the process (only the PID this test started) and fails the
// test with why and the process's stderr.
func (p *proc) kill(t *testing.T, why string) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	<-p.done
	t.Fatalf("%s; stderr:\n%s", why, p.stderr.String())
}

// exitStatus waits at most within for the process and returns its exit
// status.
func (p *proc) exitStatus(t *testing.T, within time.Duration) int {
	t.Helper()
	var err error
	select {
	case err = <-p.done:
	case <-time.After(within):
		p.kill(t, fmt.Sprintf("still running after %v", within))
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// Standalone (no systemd), the binary the units run serves the seed routes
// on CLUSTERAPP_LISTEN as worker --instance, drains on SIGTERM and exits 0;
// an invalid setting it applies stops it with 78 and a line naming it.
func TestServesTheSeedRoutesAndDrains(t *testing.T) {
	bin := build(t)
	addr := freeAddr(t)
	good := start(t, bin, "CLUSTERAPP_LISTEN="+addr, "CLUSTERAPP_METRICS_LISTEN="+freeAddr(t))
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var res *http.Response
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := c.Get("http://" + addr + "/fib?n=10")
		if err == nil {
			res = r
			break
		}
		if time.Now().After(deadline) {
			good.kill(t, fmt.Sprintf("no answer within 15s: %v", err))
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("X-Worker") != "7" {
		t.Errorf("GET /fib?n=10: %d, X-Worker %q; want 200 from worker 7", res.StatusCode, res.Header.Get("X-Worker"))
	}
	if err := good.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := good.exitStatus(t, 30*time.Second); code != 0 {
		t.Errorf("after SIGTERM: exit %d, want 0 (a clean drain); stderr:\n%s", code, good.stderr.String())
	}

	bad := start(t, bin, "CLUSTERAPP_LISTEN="+freeAddr(t), "CLUSTERAPP_REQUEST_TIMEOUT=soon")
	if code := bad.exitStatus(t, 30*time.Second); code != command.ExitConfig || !strings.Contains(bad.stderr.String(), `CLUSTERAPP_REQUEST_TIMEOUT="soon" is invalid`) {
		t.Errorf("invalid CLUSTERAPP_REQUEST_TIMEOUT: exit %d, want %d with a line naming it; stderr:\n%s", code, command.ExitConfig, bad.stderr.String())
	}
}

// --version names the binary and the version the build stamped.
func TestVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "clusterapp-worker")
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=9.8.7", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || string(out) != "clusterapp-worker 9.8.7\n" {
		t.Errorf("--version: %q, %v; want \"clusterapp-worker 9.8.7\\n\"", out, err)
	}
}
