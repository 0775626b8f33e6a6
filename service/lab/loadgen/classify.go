package loadgen

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// errorKind is what a failed request is counted as.
type errorKind int

const (
	kindOther    errorKind = iota
	kindConnect            // the dial failed: nothing accepted the connection
	kindRead               // the connection broke after it was established
	kindTimeout            // Options.Timeout expired
	kindCanceled           // the caller cancelled the run; not a server failure
	numErrorKinds
)

// classify says what kind of failure err is. canceled tells whether the
// run's context was already done, in which case the failure is ours, not the
// server's. Order matters: a dial that timed out is a connect error (the
// accept queue did not take it), not a timeout.
func classify(err error, canceled bool) errorKind {
	var opErr *net.OpError
	var netErr net.Error
	switch {
	case canceled:
		return kindCanceled
	case errors.As(err, &opErr) && opErr.Op == "dial", errors.Is(err, syscall.ECONNREFUSED):
		return kindConnect
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return kindTimeout
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), isServerClosedIdle(err):
		return kindRead
	}
	return kindOther
}

// isServerClosedIdle matches net/http's unexported errServerClosedIdle
// ("http: server closed idle connection"): the server closed a keep-alive
// connection just as the request was sent on it. net/http offers no sentinel
// for it, so this is the one string match.
func isServerClosedIdle(err error) bool {
	return strings.Contains(err.Error(), "server closed idle connection")
}

// errorSample is err's message without the client's local address, whose
// ephemeral port differs on every connection and would make every sample
// distinct.
func errorSample(err error) string {
	msg := err.Error()
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Source != nil {
		anonymous := *opErr
		anonymous.Source = nil
		msg = strings.Replace(msg, opErr.Error(), anonymous.Error(), 1)
	}
	return msg
}
