package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPipelinedRequestsPastKeepAliveBoundLoseNoResponse pipelines more
// requests in one write than a connection may carry: the server answers the
// first KeepAliveRequests, the last with Connection: close, and must end the
// connection with a FIN after them. Closing it outright with the rest of the
// requests unread sent a reset, and the client's kernel threw away responses
// it had already received but not yet read (seen: 725 of 1000 read).
func TestPipelinedRequestsPastKeepAliveBoundLoseNoResponse(t *testing.T) {
	const bound, sent = 5, 400
	_, addr := newServer(t, func(o *Options) { o.KeepAliveRequests = bound }, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Far more than net/http's 4 KiB read buffer, so most of it is still in
	// the server's socket when it closes the connection.
	req := "GET /" + strings.Repeat("a", 200) + " HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := io.WriteString(conn, strings.Repeat(req, sent)); err != nil {
		t.Fatal(err)
	}
	// Let the server answer and close before the client reads anything, as
	// a client busy elsewhere would.
	time.Sleep(200 * time.Millisecond)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	for i := 1; i <= bound; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d of %d: %v", i, bound, err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatalf("response %d body: %v", i, err)
		}
		resp.Body.Close()
		if resp.Close != (i == bound) {
			t.Fatalf("response %d: Connection: close = %v, want it on the last only", i, resp.Close)
		}
	}
	if n, err := br.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last response: read %d bytes, %v; want the server's FIN (EOF), not a reset", n, err)
	}
}

// TestDrainEndsPipelinedConnectionWithFIN: a request answered while the
// worker drains carries Connection: close; requests the client already
// pipelined behind it must not turn that close into a reset that destroys
// the answer.
func TestDrainEndsPipelinedConnectionWithFIN(t *testing.T) {
	release := make(chan struct{})
	s, addr := newServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "ok")
	}))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET /" + strings.Repeat("a", 200) + " HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := io.WriteString(conn, strings.Repeat(req, 200)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.Stats().InFlight == 1 })
	done := make(chan error, 1)
	go func() { done <- s.Drain(context.Background()) }()
	waitFor(t, func() bool { return s.Stats().Draining })
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the request in flight at the drain: %v", err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("its body: %v", err)
	}
	resp.Body.Close()
	if !resp.Close {
		t.Fatal("the answer during a drain carries no Connection: close")
	}
	if n, err := br.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last response: read %d bytes, %v; want the server's FIN (EOF), not a reset", n, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
