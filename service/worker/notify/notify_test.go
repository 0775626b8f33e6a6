package notify

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// listen opens a real notify socket in a temporary directory.
func listen(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return c
}

func read(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestMessagesReachTheSocket(t *testing.T) {
	c := listen(t)
	l, _ := test.NewNullLogger()
	n := New(logrus.NewEntry(l))
	if err := n.Ready("serving"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, c); got != "READY=1\nSTATUS=serving" {
		t.Fatalf("got %q", got)
	}
	n.Status("a")
	n.Status("a") // a repeat is not sent
	n.Status("b")
	if got := read(t, c) + "|" + read(t, c); got != "STATUS=a|STATUS=b" {
		t.Fatalf("got %q", got)
	}
	n.Watchdog()
	n.Watchdog() // the socket is still set after the first message
	if got := read(t, c) + "|" + read(t, c); got != "WATCHDOG=1|WATCHDOG=1" {
		t.Fatalf("got %q", got)
	}
	n.Stopping("draining")
	if got := read(t, c); !strings.HasPrefix(got, "STOPPING=1") {
		t.Fatalf("got %q", got)
	}
}

func TestNoSocketIsANoOp(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	l, hook := test.NewNullLogger()
	n := New(logrus.NewEntry(l))
	if err := n.Ready("x"); err != nil || len(hook.AllEntries()) != 0 {
		t.Fatalf("Ready without a socket: %v %v", err, hook.AllEntries())
	}
}

func TestFailureLoggedOnce(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "missing.sock"))
	l, hook := test.NewNullLogger()
	n := New(logrus.NewEntry(l))
	for range 3 {
		if err := n.Watchdog(); err == nil {
			t.Fatal("want an error for a missing socket")
		}
	}
	if len(hook.AllEntries()) != 1 {
		t.Fatalf("logged %d times, want once", len(hook.AllEntries()))
	}
}

func TestWatchdogInterval(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "2000000")
	t.Setenv("WATCHDOG_PID", "")
	if d, err := WatchdogInterval(); err != nil || d != 2*time.Second {
		t.Fatalf("WatchdogInterval = %v, %v", d, err)
	}
	t.Setenv("WATCHDOG_USEC", "")
	if d, err := WatchdogInterval(); err != nil || d != 0 {
		t.Fatalf("WatchdogInterval without watchdog = %v, %v", d, err)
	}
}
