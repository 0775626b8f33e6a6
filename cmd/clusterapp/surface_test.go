package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The built worker, driven as a client and an attacker would: what
// net/http refuses before a route (a malformed request, headers trickled
// past CLUSTERAPP_READ_HEADER_TIMEOUT) is counted, a client pipelining past
// CLUSTERAPP_KEEPALIVE_REQUESTS reads every answer it is owed and then the
// end of the stream, the metrics listener answers a wrong path in JSON, and
// the worker still serves after all of it.
func TestWorkerSurfaceUnderBadClients(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, "--instance=5", "CLUSTERAPP_READ_HEADER_TIMEOUT=500ms", "CLUSTERAPP_KEEPALIVE_REQUESTS=5")
	n.waitFor(t, "READY=1", 10*time.Second)
	dial := func() net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", sock.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a hung worker fails the read, not the test run
		return c
	}

	malformed := dial()
	io.WriteString(malformed, "GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n")
	if b, _ := io.ReadAll(malformed); !strings.HasPrefix(string(b), "HTTP/1.1 400 ") {
		t.Fatalf("malformed request: %q", b)
	}
	malformed.Close()
	slow := dial()
	io.WriteString(slow, "GET / HTTP/1.1\r\n")
	if _, err := io.ReadAll(slow); err != nil {
		t.Fatalf("headers trickled: %v, want the worker to end the connection at the timeout", err)
	}
	slow.Close()

	pipelined := dial()
	defer pipelined.Close()
	req := "GET /fib?n=1&pad=" + strings.Repeat("a", 200) + " HTTP/1.1\r\nHost: x\r\n\r\n"
	io.WriteString(pipelined, strings.Repeat(req, 100))
	time.Sleep(200 * time.Millisecond) // the worker answers and ends the connection before the client reads
	br := bufio.NewReader(pipelined)
	for i := 1; i <= 5; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("pipelined response %d of 5: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the 5th pipelined response: %v, want the end of the stream", err)
	}

	resp, body := get(t, "http://"+sock.metrics.addr+"/nope")
	var e map[string]any
	if resp.StatusCode != 404 || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e["error"].(string), "/metrics") {
		t.Fatalf("metrics listener, GET /nope: %d %q, want a JSON 404 naming /metrics", resp.StatusCode, body)
	}
	_, metrics := get(t, "http://"+sock.metrics.addr+"/metrics")
	if got := metricValue(metrics, "clusterapp_http_requests_rejected_total", `worker="5"`); got != "2" {
		t.Errorf("clusterapp_http_requests_rejected_total = %q, want 2 (the malformed and the trickled request)", got)
	}
	if got := metricValue(metrics, "clusterapp_http_requests_total", `route="/fib"`, `code="200"`, `worker="5"`); got != "5" {
		t.Errorf(`clusterapp_http_requests_total{route="/fib",code="200"} = %q, want 5`, got)
	}
	if resp, body := get(t, "http://"+sock.addr+"/healthz"); resp.StatusCode != 200 {
		t.Fatalf("/healthz after the bad clients: %d %s", resp.StatusCode, body)
	}
	w.signal(t, syscall.SIGTERM)
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}
