package main

import (
	"bytes"
	"errors"
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

// exitStatus waits at most within for cmd and returns its exit status.
func exitStatus(t *testing.T, cmd *exec.Cmd, done <-chan error, within time.Duration) int {
	t.Helper()
	select {
	case err := <-done:
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		_ = cmd.Process.Kill() // only the PID this test started
		t.Fatalf("still running after %v", within)
		return -1
	}
}

// Standalone (no systemd), the binary the units run serves the seed routes
// on CLUSTERAPP_LISTEN as worker --instance, drains on SIGTERM and exits 0;
// an invalid setting it applies stops it with 78 and a line naming it.
func TestServesTheSeedRoutesAndDrains(t *testing.T) {
	bin := build(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--instance", "7")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "CLUSTERAPP_LISTEN=" + addr, "CLUSTERAPP_METRICS_LISTEN=" + freeAddr(t)}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", stderr.String())
		}
	}()
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
			_ = cmd.Process.Kill()
			t.Fatalf("no answer within 15s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("X-Worker") != "7" {
		t.Errorf("GET /fib?n=10: %d, X-Worker %q; want 200 from worker 7", res.StatusCode, res.Header.Get("X-Worker"))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitStatus(t, cmd, done, 30*time.Second); code != 0 {
		t.Errorf("after SIGTERM: exit %d, want 0 (a clean drain)", code)
	}

	bad := exec.Command(bin, "--instance", "7")
	bad.Env = []string{"PATH=/usr/bin:/bin", "CLUSTERAPP_LISTEN=" + freeAddr(t), "CLUSTERAPP_REQUEST_TIMEOUT=soon"}
	var badErr bytes.Buffer
	bad.Stderr = &badErr
	if err := bad.Start(); err != nil {
		t.Fatal(err)
	}
	badDone := make(chan error, 1)
	go func() { badDone <- bad.Wait() }()
	if code := exitStatus(t, bad, badDone, 30*time.Second); code != command.ExitConfig || !strings.Contains(badErr.String(), `CLUSTERAPP_REQUEST_TIMEOUT="soon" is invalid`) {
		t.Errorf("invalid CLUSTERAPP_REQUEST_TIMEOUT: exit %d, want %d with a line naming it; stderr:\n%s", code, command.ExitConfig, badErr.String())
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
