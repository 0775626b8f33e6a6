package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A handler may stream (w.(http.Flusher), the idiom of every server-sent
// events example) and take the connection over (w.(http.Hijacker), as
// WebSocket libraries do) through the writer the server hands it. The
// writer hid both: the assertion failed, and a stream was buffered until
// the handler returned.
func TestHandlerWriterFlushesAndHijacks(t *testing.T) {
	flushed := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			f, ok := w.(http.Flusher)
			if !ok {
				http.Error(w, "no http.Flusher", http.StatusInternalServerError)
				return
			}
			io.WriteString(w, "first\n")
			f.Flush()
			<-flushed // the client has read "first" before the handler returns
			io.WriteString(w, "second\n")
		case "/hijack":
			hj, ok := w.(http.Hijacker)
			if !ok {
				http.Error(w, "no http.Hijacker", http.StatusInternalServerError)
				return
			}
			c, rw, err := hj.Hijack()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			defer c.Close()
			rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\nhijacked\n")
			rw.Flush()
		}
	})
	_, addr := newServer(t, nil, h)

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if resp.StatusCode != 200 || err != nil || line != "first\n" {
		t.Fatalf("stream: %d %q %v, want 200 and the flushed line while the handler still runs", resp.StatusCode, line, err)
	}
	close(flushed)

	conn2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	_ = conn2.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn2, "GET /hijack HTTP/1.1\r\nHost: x\r\n\r\n")
	got, _ := io.ReadAll(conn2)
	if !strings.HasPrefix(string(got), "HTTP/1.1 101 ") || !strings.HasSuffix(string(got), "hijacked\n") {
		t.Fatalf("hijack: %q", got)
	}
}

// A handler that writes nothing is answered 200 by net/http after it
// returns, past the writer: the keep-alive bound and a drain must still
// end its connection. Its answer carried no Connection: close, so the
// bound never applied to it, and a drain left the client to reuse a
// connection the drain was about to close.
func TestEmptyAnswerStillEndsTheConnection(t *testing.T) {
	_, addr := newServer(t, func(o *Options) { o.KeepAliveRequests = 2 }, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	conn, br := keepAliveClient(t, addr)
	for i := 1; i <= 2; i++ {
		io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close != (i == 2) {
			t.Fatalf("request %d: %d, Connection: close = %v; want 200, close on the 2nd only", i, resp.StatusCode, resp.Close)
		}
	}
}

// Handlers write strings (io.WriteString) and files (io.Copy,
// http.ServeContent) through the writer the server hands them. It had
// neither WriteString nor ReadFrom: every string was copied into a new byte
// slice on its way to net/http's own WriteString, and every file went
// through a 32 KiB buffer instead of net/http's sendfile. Both still go
// through the writer's header, so the connection's last answer says
// Connection: close.
func TestHandlerWriterWritesStringsAndFiles(t *testing.T) {
	page := "<!DOCTYPE html><title>t</title>" + strings.Repeat("x", 200<<10)
	file, err := os.CreateTemp(t.TempDir(), "page")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.WriteString(page); err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, sw := w.(io.StringWriter)
		_, rf := w.(io.ReaderFrom)
		if !sw || !rf {
			http.Error(w, "no WriteString or no ReadFrom", http.StatusNotImplemented)
			return
		}
		switch r.URL.Path {
		case "/string":
			_, _ = io.WriteString(w, "a string\n")
		case "/file":
			_, _ = file.Seek(0, io.SeekStart)
			_, _ = io.Copy(w, file) // finds the writer's ReadFrom, as http.ServeContent does
		}
	})
	_, addr := newServer(t, func(o *Options) { o.KeepAliveRequests = 2 }, h)
	conn, br := keepAliveClient(t, addr)
	for i, c := range []struct{ path, body, ctype string }{
		{"/string", "a string\n", "text/plain; charset=utf-8"},
		{"/file", page, "text/html; charset=utf-8"},
	} {
		io.WriteString(conn, "GET "+c.path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(body) != c.body {
			t.Fatalf("%s: %d, %d bytes (%v); want 200 and the %d bytes written", c.path, resp.StatusCode, len(body), err, len(c.body))
		}
		if ct := resp.Header.Get("Content-Type"); ct != c.ctype {
			t.Errorf("%s: Content-Type %q, want %q (sniffed from the first bytes)", c.path, ct, c.ctype)
		}
		if resp.Close != (i == 1) {
			t.Errorf("%s: Connection: close = %v; want it on the connection's last answer only", c.path, resp.Close)
		}
	}
}

// A string written through the handler's writer is not copied on the way.
func TestHandlerWriterWritesStringsWithoutCopies(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Body.Grow(1 << 20)
	w := &closingWriter{ResponseWriter: rec, draining: &atomic.Bool{}}
	if n := testing.AllocsPerRun(100, func() { _, _ = io.WriteString(w, "Hello World!\n") }); n != 0 {
		t.Fatalf("io.WriteString through the writer: %.1f allocations a call, want 0", n)
	}
}

// keepAliveClient is one client connection to addr, closed at the test's
// end, with 5 s to do its work, and a reader for its responses.
func keepAliveClient(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	return conn, bufio.NewReader(conn)
}
