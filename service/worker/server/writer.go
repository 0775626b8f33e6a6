package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// closingWriter adds Connection: close when the header is written during a
// drain, so requests that began before the drain also end their connection,
// and on a connection's last allowed request. It records the status too
// (Status), so the per-route metrics need no writer of their own.
type closingWriter struct {
	http.ResponseWriter
	draining *atomic.Bool
	last     bool
	// rebalance ends the connection when it says so (Options.Rebalance).
	rebalance func() bool
	closing   bool // Connection: close was added
	hijacked  bool // the handler took the connection over
	status    int  // the first status written; 0 before the header
	// request is the request's number on its connection, 1 for the first;
	// 0 for a request that came on no connection (served in process).
	request int64
}

// RequestOnConn is the number of the request w answers on its connection,
// 1 for the first: the server counts the requests each connection carried
// to its handler. 0 when the server does not know: w is not the writer it
// handed the handler (a test's recorder, an in-process health probe), or
// the request came on no connection (Handler called in process). A worker
// names itself (X-Worker) on the first response of a connection only, by
// default: every later response on it comes from the same worker.
func RequestOnConn(w http.ResponseWriter) int64 {
	if cw, ok := w.(*closingWriter); ok {
		return cw.request
	}
	return 0
}

func (w *closingWriter) WriteHeader(code int) {
	if w.status == 0 && (code < 100 || code >= 200) { // 1xx (103 Early Hints) come before the status
		w.status = code
		if w.last || w.draining.Load() || (w.rebalance != nil && w.rebalance()) {
			w.Header().Set("Connection", "close")
			w.closing = true
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// WriteString is Write for a string. Without it, io.WriteString (and every
// writer of strings that looks for it) copied each string into a new byte
// slice to reach net/http's own WriteString through Write.
func (w *closingWriter) WriteString(s string) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return io.WriteString(w.ResponseWriter, s)
}

// ReadFrom sends what r holds through net/http's own ReadFrom, which hands a
// file to the connection's sendfile after sniffing its first bytes: without
// it, io.Copy into the writer (http.ServeContent, http.FileServer) copied
// every file through a 32 KiB buffer in the worker.
func (w *closingWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return io.Copy(w.ResponseWriter, r)
}

// Status is the status written, 200 when the handler wrote nothing (what
// net/http then sends).
func (w *closingWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func (w *closingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush sends what the handler wrote so far (a stream, server-sent events).
// The writer must offer it itself: a handler asserting w.(http.Flusher), as
// most streaming code does, does not look through Unwrap. The header goes
// through WriteHeader first, so a drain or the connection's last request
// still adds Connection: close to it.
func (w *closingWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush() // a client that left gets nothing; the next Write says so
}

// Hijack hands the connection over to the handler (WebSocket libraries
// assert w.(http.Hijacker)); its error is net/http's when it cannot.
func (w *closingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	w.hijacked = err == nil
	return c, rw, err
}
