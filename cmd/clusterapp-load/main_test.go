package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/loadgen"
)

// TestMain lets the tests run the real main, signal handling and exit
// status included, by re-executing the test binary with this variable set.
func TestMain(m *testing.M) {
	if os.Getenv("CLUSTERAPP_LOAD_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

func command(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "CLUSTERAPP_LOAD_TEST_MAIN=1")
	return cmd
}

func workerServer(t *testing.T, workers int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var handled atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := handled.Add(1) - 1
		w.Header().Set("X-Worker", fmt.Sprintf("w%d", n%int64(workers)))
	}))
	t.Cleanup(srv.Close)
	return srv, &handled
}

func TestRunJSON(t *testing.T) {
	srv, handled := workerServer(t, 2)
	var out bytes.Buffer
	err := run(context.Background(), []string{"-url", srv.URL, "-n", "50", "-c", "4", "-d", "0", "-json"}, &out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if lines := strings.Count(out.String(), "\n"); lines != 1 {
		t.Errorf("output has %d lines, want one JSON object:\n%s", lines, out.String())
	}
	var fields map[string]any
	if err := json.Unmarshal(out.Bytes(), &fields); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	for _, key := range []string{"requests", "ok", "status_codes", "connect_errors", "read_errors", "timeouts",
		"other_errors", "error_samples", "elapsed_ns", "throughput_rps", "latency", "by_header"} {
		if _, ok := fields[key]; !ok {
			t.Errorf("JSON lacks %q: %s", key, out.String())
		}
	}
	res, err := loadgen.ParseResult(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 50 || res.OK != 50 || handled.Load() != 50 || res.ByHeader["w0"] != 25 || res.ByHeader["w1"] != 25 {
		t.Errorf("requests %d ok %d handled %d by header %v, want 50, 50, 50, 25 each", res.Requests, res.OK, handled.Load(), res.ByHeader)
	}
	if res.Concurrency != 4 || !res.KeepAlive || res.Dials > 4 {
		t.Errorf("concurrency %d keep-alive %v dials %d, want 4, true, at most 4", res.Concurrency, res.KeepAlive, res.Dials)
	}
}

func TestRunSummary(t *testing.T) {
	srv, _ := workerServer(t, 1)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", srv.URL, "-n", "20", "-keepalive=false", "-d", "5s"}, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{"20 requests, 20 responses (20 2xx), 0 errors", "a new connection per request, 20 connections", "X-Worker  w0=20"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadFlags(t *testing.T) {
	const target = "http://127.0.0.1:1/"
	tests := []struct {
		args []string
		want string // the flag named in the error
	}{
		{[]string{"-url", target, "-c", "x"}, "-c"},
		{[]string{"-url", target, "-c", "0"}, "-c"},
		{[]string{"-url", target, "-c", "100000"}, "-c"},
		{[]string{"-url", target, "-n", "-5"}, "-n"},
		{[]string{"-url", target, "-d", "soon"}, "-d"},
		{[]string{"-url", target, "-d", "1h"}, "-d"},
		{[]string{"-url", target, "-d", "0"}, "-d"},
		{[]string{"-url", target, "-rate", "-1"}, "-rate"},
		{[]string{"-url", target, "-timeout", "0"}, "-timeout"},
		{[]string{"-url", target, "-keepalive=maybe"}, "-keepalive"},
		{[]string{"-url", target, "-header", "X Worker"}, "-header"},
		{[]string{"-url", "http://10.0.0.1/"}, "-url"},
		{[]string{"-url", "127.0.0.1:8080"}, "-url"},
		{[]string{"-n", "1"}, "-url"},
		{[]string{"-url", target, "-bogus"}, "-bogus"},
		{[]string{"-url", target, "extra"}, "-url"},
		{[]string{"-url", target, "-n", "1", "-trace", "/nonexistent/dir/trace.txt"}, "-trace"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		err := run(context.Background(), tt.args, &out)
		if code := exitCode(err); code != 2 {
			t.Errorf("%q: exit code %d (error %v), want 2", tt.args, code, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
			t.Errorf("%q: error %q, want one line naming %s", tt.args, msg, tt.want)
		}
		if out.Len() != 0 {
			t.Errorf("%q: wrote %q to stdout, want nothing", tt.args, out.String())
		}
	}
}

func TestTraceFile(t *testing.T) {
	srv, _ := workerServer(t, 1)
	path := t.TempDir() + "/trace.txt"
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", srv.URL, "-n", "10", "-c", "2", "-d", "0", "-trace", path}, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 11 || !strings.HasPrefix(lines[0], "# due_unix_us") {
		t.Fatalf("trace has %d lines, want a header and 10 requests:\n%s", len(lines), b)
	}
	for _, l := range lines[1:] {
		var due, late, latency int64
		var status int
		if n, err := fmt.Sscanf(l, "%d %d %d %d", &due, &late, &latency, &status); n != 4 || err != nil || status != 200 || latency < late || due < time.Now().Add(-time.Hour).UnixMicro() {
			t.Errorf("trace line %q: want due (Unix µs, this hour), late, latency >= late, status 200", l)
		}
	}
}

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) || exitCode(err) != 0 || !strings.Contains(out.String(), "-keepalive") {
		t.Errorf("-h: error %v, exit %d, output %q; want usage on stdout and exit 0", err, exitCode(err), out.String())
	}
}

func TestBinaryBadFlagExitsTwo(t *testing.T) {
	var stdout, stderr bytes.Buffer
	cmd := command(t, "-url", "http://192.0.2.1/", "-n", "1")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2", err)
	}
	want := "clusterapp-load: -url: want a host in 127.0.0.0/8, ::1 or localhost, got \"192.0.2.1\"\n"
	if stderr.String() != want || stdout.Len() != 0 {
		t.Errorf("stderr %q stdout %q, want stderr %q and no stdout", stderr.String(), stdout.String(), want)
	}
}

func TestBinarySignalPrintsResult(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) { testSignalPrintsResult(t, sig) })
	}
}

func testSignalPrintsResult(t *testing.T, sig syscall.Signal) {
	// The server holds every request until the client gives up, so the
	// signal always lands mid-run; the result must still be printed. A
	// request arriving also proves main has installed its signal handler.
	started := make(chan struct{}, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	var stdout, stderr bytes.Buffer
	cmd := command(t, "-url", srv.URL, "-c", "2", "-d", "1m", "-json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill() // the test has failed; do not leave the child running
		t.Fatalf("no request arrived; stderr %q", stderr.String())
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit %v, want 0; stderr %q", err, stderr.String())
	}
	res, err := loadgen.ParseResult(stdout.Bytes())
	if err != nil {
		t.Fatalf("stdout is not the JSON result: %v", err)
	}
	if !res.Interrupted || res.Requests == 0 || res.Canceled != res.Requests {
		t.Errorf("interrupted %v requests %d canceled %d, want an interrupted run with its requests canceled", res.Interrupted, res.Requests, res.Canceled)
	}
}

func TestRunClosedPortCountsConnectErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := "http://" + ln.Addr().String() + "/"
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", target, "-n", "5", "-c", "1", "-json"}, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	res, err := loadgen.ParseResult(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if res.ConnectErrors != 5 || res.Requests != 5 {
		t.Errorf("connect errors %d of %d requests, want 5 of 5", res.ConnectErrors, res.Requests)
	}
}
