package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A 404 for a path as long as the header limit allows quotes its first 256
// bytes, in the answer and in the access log's journal line: a client must
// not make the worker reflect kilobytes.
func TestNotFoundQuotesThePathClipped(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, "--instance=6", "CLUSTERAPP_ACCESS_LOG=true")
	n.waitFor(t, "READY=1", 10*time.Second)

	path := "/" + strings.Repeat("p", 16<<10)
	resp, body := get(t, "http://"+sock.addr+path)
	var e map[string]any
	if resp.StatusCode != 404 || json.Unmarshal([]byte(body), &e) != nil || e["error"] != "no route for "+path[:256]+"…" {
		t.Errorf("GET of a %d-byte path: %d, %d bytes: %.400q, want a JSON 404 quoting its first 256 bytes", len(path), resp.StatusCode, len(body), body)
	}
	waitLog(t, w, path[:64], 10*time.Second) // the access log line follows the answer
	for _, line := range strings.Split(w.stderr.String(), "\n") {
		if strings.Contains(line, path[:64]) && len(line) > 1024 {
			t.Fatalf("a log line of %d bytes quotes the path: %.400q", len(line), line)
		}
	}
	if !strings.Contains(w.stderr.String(), path[:256]+"…") {
		t.Fatalf("no access log line quotes the path clipped to 256 bytes:\n%.2000s", w.stderr)
	}
	stop(t, w)
}

// /readyz's 503 during a drain says so, with the drain's reason, in the
// suite's JSON error body.
func TestReadyzSaysWhyWhileDraining(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, "--instance=6", "CLUSTERAPP_DRAIN_IDLE_GRACE=1h", "CLUSTERAPP_SHUTDOWN_TIMEOUT=1h")
	n.waitFor(t, "READY=1", 10*time.Second)

	// A keep-alive connection held open across the drain (the idle grace
	// is an hour) asks /readyz until the drain has begun.
	c, err := net.DialTimeout("tcp", sock.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // a hung worker fails the read, not the test run
	br := bufio.NewReader(c)
	readyz := func() (*http.Response, string) {
		t.Helper()
		if _, err := io.WriteString(c, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	if resp, body := readyz(); resp.StatusCode != 200 {
		t.Fatalf("/readyz while serving: %d %s", resp.StatusCode, body)
	}
	w.signal(t, syscall.SIGTERM)
	n.waitFor(t, "STOPPING=1", 5*time.Second)
	resp, body := readyz()
	for resp.StatusCode == 200 { // the drain has not reached the server yet
		resp, body = readyz()
	}
	var e map[string]any
	_ = json.Unmarshal([]byte(body), &e) // a body that is not JSON fails below
	msg, _ := e["error"].(string)
	if resp.StatusCode != 503 || e["state"] != "draining" || e["status"] != 503.0 || e["worker"] != "6" ||
		!strings.HasPrefix(msg, "draining: ") || !strings.Contains(msg, "(signal terminated)") {
		t.Fatalf("/readyz while draining: %d %s, want a JSON 503 saying draining on signal terminated", resp.StatusCode, body)
	}
	if !resp.Close {
		t.Fatalf("/readyz while draining: no Connection: close")
	}
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}
