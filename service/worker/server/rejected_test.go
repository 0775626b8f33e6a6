package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rejectLog counts what a RejectObserver is told.
type rejectLog struct {
	rejected atomic.Int64
	closed   chan struct{}
}

func (r *rejectLog) ConnOpened()      {}
func (r *rejectLog) ConnClosed()      { r.closed <- struct{}{} }
func (r *rejectLog) RequestRejected() { r.rejected.Add(1) }

// A request net/http ends before the handler sees it (headers trickled past
// CLUSTERAPP_READ_HEADER_TIMEOUT, headers over the cap, a malformed one,
// a connection that never sends a byte) is counted; nothing counted it, so
// a slowloris showed in the metrics as connections accepted and nothing
// else. Requests the handler answered, whatever their status, are not.
func TestRejectedRequestsAreCounted(t *testing.T) {
	obs := &rejectLog{closed: make(chan struct{}, 16)}
	_, addr := newServer(t, func(o *Options) {
		o.ReadHeaderTimeout = 300 * time.Millisecond
		o.MaxHeaderBytes = 1024
		o.ConnObservers = []ConnObserver{obs}
	}, nil)
	session := func(what string, send func(net.Conn)) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		send(c)
		_, _ = io.Copy(io.Discard, c) // until the server closes it
		c.Close()
		select {
		case <-obs.closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the connection was not closed", what)
		}
	}
	counts := func(what string, want int64) {
		t.Helper()
		if got := obs.rejected.Load(); got != want {
			t.Fatalf("after %s: %d rejected requests counted, want %d", what, got, want)
		}
	}

	session("two answered requests", func(c net.Conn) {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	})
	counts("two answered requests", 0)
	session("headers trickled past the timeout", func(c net.Conn) {
		for _, b := range []byte("GET / HTTP/1.1\r\nHost: x\r\n") {
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	counts("headers trickled past the timeout", 1)
	session("a header over the cap", func(c net.Conn) {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 8000)+"\r\n\r\n")
	})
	counts("a header over the cap", 2)
	session("an answered request, then a malformed one", func(c net.Conn) {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n")
	})
	counts("an answered request, then a malformed one", 3)
	session("a connection that never sends a byte", func(net.Conn) {})
	counts("a connection that never sends a byte", 4)
}
