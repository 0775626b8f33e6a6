package acceptq

import (
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func rawConn(t *testing.T, l net.Listener) syscall.RawConn {
	t.Helper()
	rc, err := l.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// Connections the kernel has completed but nobody accepted are the queue's
// length; the limit is the listen backlog, never 0.
func TestReadCountsWaitingConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rc := rawConn(t, l)
	if n, limit, err := Read(rc); err != nil || n != 0 || limit == 0 {
		t.Fatalf("empty queue: length %d, limit %d, %v; want 0 and a limit", n, limit, err)
	}
	for range 3 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	var n uint32
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n, _, err = Read(rc); err != nil || n == 3 {
			break
		}
	}
	if err != nil || n != 3 {
		t.Fatalf("3 connections waiting: length %d, %v", n, err)
	}
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, _, err = Read(rc); err != nil || n != 2 {
		t.Fatalf("one accepted: length %d, %v; want 2", n, err)
	}
}

// A socket that is not TCP, or is closed, is an error, not an empty queue.
func TestReadRefusesWhatItCannotRead(t *testing.T) {
	u, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if _, _, err := Read(rawConn(t, u)); err == nil {
		t.Error("a unix socket read as a TCP accept queue")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := rawConn(t, l)
	l.Close()
	if _, _, err := Read(rc); err == nil {
		t.Error("a closed socket read as an accept queue")
	}
}
