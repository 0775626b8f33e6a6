package notify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// helperEnv makes the test binary run atFileLimit instead of the tests.
const helperEnv = "NOTIFY_TEST_AT_FILE_LIMIT"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		if err := atFileLimit(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// atFileLimit runs in a child process: it makes a Notifier, then uses up
// every descriptor its (lowered) limit allows, and sends messages.
func atFileLimit() error {
	l := logrus.New()
	n := New(logrus.NewEntry(l))
	defer n.Close()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 64, Max: 64}); err != nil {
		return fmt.Errorf("lower RLIMIT_NOFILE: %w", err)
	}
	full := false
	for range 128 { // bounded: the limit is 64
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			full = true
			break
		}
		if err != nil {
			return err
		}
		defer f.Close()
	}
	if !full {
		return errors.New("never reached the open-file limit")
	}
	for range 3 {
		if err := n.Watchdog(); err != nil {
			return fmt.Errorf("watchdog ping at the open-file limit: %w", err)
		}
	}
	return n.Status("at the limit")
}

// A worker whose descriptors are all taken (by client connections) still
// reaches systemd: the ping needs no new descriptor.
func TestMessagesNeedNoNewDescriptor(t *testing.T) {
	c := listen(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child at its open-file limit: %v\n%s", err, out)
	}
	got := []string{read(t, c), read(t, c), read(t, c), read(t, c)}
	want := []string{"WATCHDOG=1", "WATCHDOG=1", "WATCHDOG=1", "STATUS=at the limit"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestOneDialForEveryMessage(t *testing.T) {
	c := listen(t)
	dials := 0
	s := newSocket(os.Getenv("NOTIFY_SOCKET"), func(a *net.UnixAddr) (*net.UnixConn, error) {
		dials++
		return dialUnixgram(a)
	})
	defer s.close()
	for i := range 5 {
		if err := s.send([]byte(fmt.Sprint("STATUS=", i))); err != nil {
			t.Fatal(err)
		}
		if got := read(t, c); got != fmt.Sprint("STATUS=", i) {
			t.Fatalf("got %q", got)
		}
	}
	if dials != 1 {
		t.Fatalf("dialled %d times for 5 messages, want once", dials)
	}
}

// After systemd's socket is replaced (a manager restarted, a test harness),
// the old connection is refused; the next message dials again and arrives.
func TestRedialsWhenTheSocketIsReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	first, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOTIFY_SOCKET", path)
	l, hook := test.NewNullLogger()
	n := New(logrus.NewEntry(l))
	defer n.Close()
	if err := n.Watchdog(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, first); got != "WATCHDOG=1" {
		t.Fatalf("got %q", got)
	}
	first.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	second, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := n.Watchdog(); err != nil {
		t.Fatalf("ping after the socket was replaced: %v", err)
	}
	if got := read(t, second); got != "WATCHDOG=1" {
		t.Fatalf("got %q", got)
	}
	if len(hook.AllEntries()) != 0 {
		t.Fatalf("a re-dial that succeeded was logged: %v", hook.AllEntries()[0].Message)
	}
}

func TestAbstractSocket(t *testing.T) {
	name := fmt.Sprintf("@clusterapp-notify-test-%d", os.Getpid())
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Setenv("NOTIFY_SOCKET", name)
	l, _ := test.NewNullLogger()
	n := New(logrus.NewEntry(l))
	defer n.Close()
	if err := n.Ready("up"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, c); got != "READY=1\nSTATUS=up" {
		t.Fatalf("got %q", got)
	}
}

func TestSendAfterClose(t *testing.T) {
	listen(t)
	l, hook := test.NewNullLogger()
	n := New(logrus.NewEntry(l))
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Watchdog(); !errors.Is(err, ErrClosed) {
		t.Fatalf("ping after Close: %v, want ErrClosed", err)
	}
	if len(hook.AllEntries()) != 0 {
		t.Fatalf("a message after Close was logged: %v", hook.AllEntries()[0].Message)
	}
}
