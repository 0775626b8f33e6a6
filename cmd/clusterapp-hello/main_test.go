package main

// Process tests: the built binary, run standalone (it binds
// CLUSTERAPP_LISTEN itself) and driven from outside as an operator would.
// systemd/own_handler_test.go runs it under the shipped units.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/command"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "clusterapp-hello-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, name)
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		panic("build " + name + ": " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one run of the binary.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed
}

// syncBuffer is stderr, written by the process while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs the binary with args in a clean environment (no inherited
// CLUSTERAPP_*, LISTEN_FDS or NOTIFY_SOCKET) plus env. It is killed at
// cleanup if it still runs, and its stderr logged if the test failed.
func start(t *testing.T, args []string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	p := &proc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill() // only the PID this test started
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, p.stderr)
		}
	})
	return p
}

// exitStatus waits (bounded) for the process to end and returns its status.
func (p *proc) exitStatus(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s still running after %v", name, within)
	}
	if ee, ok := errors.AsType[*exec.ExitError](p.err); ok {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
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

// get sends one GET and returns the response with its body read.
func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	// A connection of its own: a worker names itself (X-Worker) on the
	// first response of each connection.
	c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return res, strings.TrimSpace(string(body))
}

// waitReady polls /readyz until it answers 200, failing if the process ends.
func waitReady(t *testing.T, p *proc, base string) {
	t.Helper()
	c := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("%s exited before it was ready: %v", name, p.err)
		default:
		}
		if res, err := c.Get(base + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s not ready within 15s", name)
}

// Standalone, it serves its routes and the worker's on CLUSTERAPP_LISTEN,
// bounds /work by CLUSTERAPP_REQUEST_TIMEOUT, and drains on SIGTERM: exit 0.
func TestStandalone(t *testing.T) {
	addr := freeAddr(t)
	base := "http://" + addr
	p := start(t, []string{"--instance", "7"}, "CLUSTERAPP_LISTEN="+addr,
		"CLUSTERAPP_METRICS_LISTEN="+freeAddr(t), "CLUSTERAPP_REQUEST_TIMEOUT=300ms")
	waitReady(t, p, base)

	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/hello?name=Ada", 200, `{"greeting":"hello, Ada","worker":"7"}`},
		{"/hello", 200, `{"greeting":"hello, world","worker":"7"}`},
		{"/healthz", 200, `{"status":"ok","worker":"7"}`},
		{"/readyz", 200, `{"status":"ready","worker":"7"}`},
		{"/nope", 404, `{"error":"no route for /nope","routes":["/healthz","/hello","/readyz","/work"],"status":404}`},
		{"/work?ms=5", 200, `{"slept_ms":5}`},
		{"/work?ms=-1", 400, ""},
		{"/hello?name=" + strings.Repeat("x", maxNameRunes+1), 400, ""},
	} {
		res, body := get(t, base+c.path)
		if res.StatusCode != c.code || (c.body != "" && !jsonEqual(body, c.body)) {
			t.Errorf("GET %s = %d %s, want %d %s", c.path, res.StatusCode, body, c.code, c.body)
		}
		if w := res.Header.Get("X-Worker"); w != "7" {
			t.Errorf("GET %s: X-Worker %q, want 7", c.path, w)
		}
		if ct := res.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("GET %s: Content-Type %q, want application/json", c.path, ct)
		}
	}
	// The deadline (300ms) comes long before the 5s sleep.
	res, body := get(t, base+"/work?ms=5000")
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "timed out after 300ms") {
		t.Errorf("GET /work?ms=5000 under a 300ms CLUSTERAPP_REQUEST_TIMEOUT = %d %s, want 503 naming the timeout", res.StatusCode, body)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitStatus(t, 30*time.Second); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0", code)
	}
	if !strings.Contains(p.stderr.String(), "drained") {
		t.Errorf("no drain logged before the exit:\n%s", p.stderr)
	}
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// An invalid setting the worker applies stops it with 78 (EX_CONFIG) and a
// line naming the variable; a bad command line is 2; `exited` outside the
// unit (no $SERVICE_RESULT) is a failure, 1.
func TestExitStatuses(t *testing.T) {
	for _, c := range []struct {
		what string
		args []string
		env  []string
		code int
		line string
	}{
		{"invalid CLUSTERAPP_REQUEST_TIMEOUT", nil, []string{"CLUSTERAPP_LISTEN=" + freeAddr(t), "CLUSTERAPP_METRICS_LISTEN=" + freeAddr(t), "CLUSTERAPP_REQUEST_TIMEOUT=soon"},
			command.ExitConfig, `CLUSTERAPP_REQUEST_TIMEOUT="soon" is invalid`},
		{"unknown flag", []string{"--workers", "2"}, nil, command.ExitUsage, "flag provided but not defined: -workers"},
		{"argument", []string{"serve", "extra"}, nil, command.ExitUsage, `unexpected argument "extra"`},
		{"bad instance", []string{"--instance", "a b"}, nil, command.ExitUsage, `--instance "a b"`},
		{"exited without --instance", []string{"exited"}, nil, command.ExitUsage, "--instance is required"},
		{"exited outside the unit", []string{"exited", "--instance", "1"}, nil, command.ExitFailure, "expected both, as systemd sets them for ExecStopPost="},
		{"help", []string{"-h"}, nil, 0, "usage: " + name},
	} {
		p := start(t, c.args, c.env...)
		code := p.exitStatus(t, 30*time.Second)
		stderr := p.stderr.String()
		if code != c.code || !strings.Contains(stderr, c.line) {
			t.Errorf("%s: exit status %d, want %d, with a line containing %q; stderr:\n%s", c.what, code, c.code, c.line, stderr)
		}
	}
}
