package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
)

func TestClassify(t *testing.T) {
	urlErr := func(err error) error { return &url.Error{Op: "Get", URL: "http://127.0.0.1:1/", Err: err} }
	opErr := func(op string, errno syscall.Errno) error {
		return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}
	}
	tests := []struct {
		name     string
		err      error
		canceled bool
		want     errorKind
	}{
		{"refused", urlErr(opErr("dial", syscall.ECONNREFUSED)), false, kindConnect},
		{"dial timeout", urlErr(&net.OpError{Op: "dial", Err: context.DeadlineExceeded}), false, kindConnect},
		{"loopback guard", urlErr(&net.OpError{Op: "dial", Err: ErrNotLoopback}), false, kindConnect},
		{"reset on read", urlErr(opErr("read", syscall.ECONNRESET)), false, kindRead},
		{"broken pipe", urlErr(opErr("write", syscall.EPIPE)), false, kindRead},
		{"eof", urlErr(io.EOF), false, kindRead},
		{"unexpected eof", io.ErrUnexpectedEOF, false, kindRead},
		{"wrapped eof", fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", io.EOF), false, kindRead},
		{"server closed idle", urlErr(errors.New("http: server closed idle connection")), false, kindRead},
		{"deadline", urlErr(context.DeadlineExceeded), false, kindTimeout},
		{"read timeout", urlErr(&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}), false, kindTimeout},
		{"canceled", urlErr(context.Canceled), true, kindCanceled},
		{"canceled wins over reset", urlErr(opErr("read", syscall.ECONNRESET)), true, kindCanceled},
		{"other", urlErr(errors.New("malformed HTTP response")), false, kindOther},
	}
	for _, tt := range tests {
		if got := classify(tt.err, tt.canceled); got != tt.want {
			t.Errorf("%s: classify(%v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestErrorSampleDropsLocalAddress(t *testing.T) {
	reset := func(localPort int) error {
		return &url.Error{Op: "Get", URL: "http://127.0.0.1:8080/", Err: &net.OpError{
			Op: "read", Net: "tcp",
			Source: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: localPort},
			Addr:   &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080},
			Err:    os.NewSyscallError("read", syscall.ECONNRESET),
		}}
	}
	want := `Get "http://127.0.0.1:8080/": read tcp 127.0.0.1:8080: read: connection reset by peer`
	if a, b := errorSample(reset(40001)), errorSample(reset(40002)); a != want || b != want {
		t.Errorf("errorSample = %q and %q, want both %q", a, b, want)
	}
}
