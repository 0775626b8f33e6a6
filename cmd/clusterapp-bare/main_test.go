package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The anchor must serve what the worker serves, or the ratios compare
// different work: the same bodies on / and /fib, the /slow workload, 404
// elsewhere.
func TestRoutes(t *testing.T) {
	h := Mux()
	for _, c := range []struct {
		target, body string
		code         int
	}{
		{"/", "Hello World!\n", 200},
		{"/fib?n=10", `{"fib":55,"n":10}` + "\n", 200},
		{"/fib?n=25", `{"fib":75025,"n":25}` + "\n", 200},
		{"/fib?n=x", "", 400},
		{"/healthz", `{"status":"ok"}` + "\n", 200},
		{"/nope", "", 404},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", c.target, nil))
		if rec.Code != c.code || (c.body != "" && rec.Body.String() != c.body) {
			t.Errorf("GET %s: %d %q, want %d %q", c.target, rec.Code, rec.Body.String(), c.code, c.body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/slow", nil))
	var slow struct {
		Count int     `json:"count"`
		Sum   float64 `json:"sum_of_squares"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &slow); err != nil || rec.Code != 200 || slow.Count != 100_000 || slow.Sum < 30_000 {
		t.Errorf("GET /slow: %d %q (%v), want 100000 squares summing near 33333", rec.Code, rec.Body.String(), err)
	}
}

// The program serves on the address it is given and stops on its context
// (the signal), exit status 0; bad flags are usage errors.
func TestRun(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-listen", addr}, io.Discard) }()
	var body string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		break
	}
	if body != "Hello World!\n" {
		t.Errorf("GET / on %s: %q", addr, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after its context ended: %v", err)
	}
	var stderr strings.Builder
	if err := run(context.Background(), []string{"-bogus"}, &stderr); !strings.Contains(stderr.String(), "-bogus") {
		t.Errorf("run -bogus: %v, stderr %q: want the bad flag named", err, stderr.String())
	}
}

// Started by systemd with a socket (LISTEN_FDS=1, LISTEN_PID its own), it
// serves that socket, not -listen's address, and stops on SIGTERM with
// status 0: the benchmark runs it so under the worker's unit. The child is
// this test binary, running TestServeInheritedChild.
func TestServesTheSocketFromSystemd(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // the child holds the socket now (f)
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeInheritedChild$")
	cmd.Env = append(os.Environ(), "BARE_INHERITED_CHILD=1", "LISTEN_FDS=1")
	cmd.ExtraFiles = []*os.File{f} // fd 3, as systemd passes it
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var body string
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	waitErr := cmd.Wait()
	if body != "Hello World!\n" {
		t.Errorf("GET / on the inherited socket %s: %q, %v; child's stderr: %s", addr, body, err, stderr.String())
	}
	if waitErr != nil {
		t.Errorf("child after SIGTERM: %v; stderr: %s", waitErr, stderr.String())
	}
}

// TestServeInheritedChild is TestServesTheSocketFromSystemd's child: it
// names itself in LISTEN_PID, as systemd would, and runs the program with
// -listen on an address it must not use.
func TestServeInheritedChild(t *testing.T) {
	if os.Getenv("BARE_INHERITED_CHILD") != "1" {
		t.Skip("the child of TestServesTheSocketFromSystemd")
	}
	os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := run(ctx, []string{"-listen", "192.0.2.1:1"}, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// BenchmarkBare is the allocation baseline for service/app's
// BenchmarkHandlerStack: the same requests through net/http's mux alone.
func BenchmarkBare(b *testing.B) {
	h := Mux()
	for _, target := range []string{"/", "/fib?n=20", "/healthz"} {
		b.Run(target, func(b *testing.B) {
			req := httptest.NewRequest("GET", target, nil)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}

// scripts/bench-stack (make bench-stack) runs both servers and prints, for
// each route, the two throughputs and CPU costs and their ratios; it stops
// both servers when done. A short run on the binaries `make build` wrote.
func TestBenchStackScript(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs two servers under load for a few seconds")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, c := range []string{"clusterapp", "clusterapp-bare", "clusterapp-load"} {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, c), "./cmd/"+c)
		build.Dir = repo
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", c, err, out)
		}
	}
	cmd := exec.Command(filepath.Join(repo, "scripts", "bench-stack"), "/", "/fib?n=20")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "BIN="+bin, "DURATION=500ms", "ROUNDS=1", "CONNS=4")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/bench-stack: %v\n%s", err, out)
	}
	t.Logf("scripts/bench-stack:\n%s", out)
	row := regexp.MustCompile(`(?m)^(\S+)\s+(\d+)\s+(\d+)\s+(\d+\.\d\d)x\s+(\d+\.\d\d)\s+(\d+\.\d\d)\s+(\d+\.\d\d)x$`)
	rows := row.FindAllStringSubmatch(string(out), -1)
	if len(rows) != 2 || rows[0][1] != "/" || rows[1][1] != "/fib?n=20" {
		t.Fatalf("want one row per route (/, /fib?n=20), got %q", rows)
	}
	for _, r := range rows {
		for _, f := range r[2:] {
			if v, _ := strconv.ParseFloat(f, 64); v <= 0 {
				t.Errorf("route %s: a zero measurement in %q", r[1], r[0])
			}
		}
	}
	for _, port := range []string{"18080", "18090"} {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
			c.Close()
			t.Errorf("something still listens on %s after the script", port)
		}
	}
}
