package listen

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

func testLog() (*logrus.Entry, *test.Hook) {
	l, hook := test.NewNullLogger()
	return logrus.NewEntry(l), hook
}

func envWith(vars map[string]string, files ...*os.File) env {
	return env{
		getenv: func(k string) string { return vars[k] },
		getpid: func() int { return 42 },
		files:  func() []*os.File { return files },
	}
}

func tcpListenerFile(t *testing.T, nonblock bool) (*os.File, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	// File() returns a blocking descriptor; systemd with NonBlocking=yes
	// passes a non-blocking one. Reopen it the way activation.Files does.
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := syscall.SetNonblock(fd, nonblock); err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), "LISTEN_FD_3"), l.Addr().String()
}

func TestFallbackBinds(t *testing.T) {
	log, _ := testLog()
	set, src, err := envWith(nil).listeners("127.0.0.1:0", "", log)
	ls := set.Service
	if err != nil || src != Bound || len(ls) != 1 {
		t.Fatalf("listeners = %v, %v, %v", ls, src, err)
	}
	ls[0].Close()
}

func TestActivatedListenerServes(t *testing.T) {
	f, addr := tcpListenerFile(t, true)
	log, hook := testLog()
	set, src, err := envWith(map[string]string{"LISTEN_FDS": "1", "LISTEN_PID": "42"}, f).listeners("unused", "", log)
	ls := set.Service
	if err != nil || src != Activated || len(ls) != 1 {
		t.Fatalf("listeners = %v, %v, %v", ls, src, err)
	}
	if len(hook.AllEntries()) != 0 {
		t.Fatalf("a non-blocking socket was logged about: %v", hook.AllEntries())
	}
	defer ls[0].Close()
	go func() {
		c, err := ls[0].Accept()
		if err == nil {
			io.WriteString(c, "hi")
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	if string(b) != "hi" {
		t.Fatalf("read %q through the inherited listener", b)
	}
}

func TestWrongPIDIsAnError(t *testing.T) {
	log, _ := testLog()
	_, _, err := envWith(map[string]string{"LISTEN_FDS": "1", "LISTEN_PID": "7"}).listeners("unused", "", log)
	if err == nil || !strings.Contains(err.Error(), "LISTEN_PID") {
		t.Fatalf("err = %v", err)
	}
}

func TestAcceptedConnectionIsRefused(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, _ := c.(*net.TCPConn).File()
	log, _ := testLog()
	_, _, err = envWith(map[string]string{"LISTEN_FDS": "1", "LISTEN_PID": "42"}, f).listeners("unused", "", log)
	if !errors.Is(err, ErrNotListening) || !strings.Contains(err.Error(), "Accept=yes") {
		t.Fatalf("err = %v", err)
	}
}

func TestBlockingSocketWarns(t *testing.T) {
	f, _ := tcpListenerFile(t, false) // like a socket unit without NonBlocking=yes
	log, hook := testLog()
	set, _, err := envWith(map[string]string{"LISTEN_FDS": "1", "LISTEN_PID": "42"}, f).listeners("unused", "", log)
	ls := set.Service
	if err != nil {
		t.Fatal(err)
	}
	ls[0].Close()
	if e := hook.LastEntry(); e == nil || e.Level != logrus.WarnLevel || !strings.Contains(e.Message, "NonBlocking=yes") {
		t.Fatalf("no blocking-mode warning: %v", hook.AllEntries())
	}
}

// The metrics socket is told apart by its FileDescriptorName=; every other
// passed socket serves the service.
func TestMetricsSocketByName(t *testing.T) {
	log, _ := testLog()
	named := func(name string) *os.File {
		f, _ := tcpListenerFile(t, true)
		defer f.Close()
		fd, err := syscall.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.SetNonblock(fd, true); err != nil {
			t.Fatal(err)
		}
		return os.NewFile(uintptr(fd), name)
	}
	set, _, err := envWith(map[string]string{"LISTEN_FDS": "2", "LISTEN_PID": "42"}, named("clusterapp.socket"), named(MetricsName)).listeners("unused", "unused", log)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if len(set.Service) != 1 || len(set.Metrics) != 1 {
		t.Fatalf("got %d service and %d metrics listeners, want 1 and 1", len(set.Service), len(set.Metrics))
	}
	_, _, err = envWith(map[string]string{"LISTEN_FDS": "1", "LISTEN_PID": "42", "LISTEN_FDNAMES": "metrics"}, named(MetricsName)).listeners("unused", "unused", log)
	if err == nil || !strings.Contains(err.Error(), "only the metrics socket") {
		t.Fatalf("only a metrics socket: err = %v, want one saying the service socket is missing", err)
	}
	// The metrics exporter is passed the metrics socket alone.
	set, err = envWith(map[string]string{"LISTEN_FDS": "1", "LISTEN_PID": "42", "LISTEN_FDNAMES": "metrics"}, named(MetricsName)).passed(log)
	if err != nil || len(set.Service) != 0 || len(set.Metrics) != 1 {
		t.Fatalf("passed the metrics socket alone: %d service and %d metrics listeners, err %v; want 0, 1, nil", len(set.Service), len(set.Metrics), err)
	}
	set.Close()
	if _, err := envWith(map[string]string{}).passed(log); err == nil || !strings.Contains(err.Error(), "LISTEN_FDS is not set") {
		t.Fatalf("nothing passed: err = %v, want one saying LISTEN_FDS is not set", err)
	}
}

// Standalone, the worker binds the metrics address too.
func TestFallbackBindsMetrics(t *testing.T) {
	log, _ := testLog()
	set, _, err := envWith(nil).listeners("127.0.0.1:0", "127.0.0.1:0", log)
	if err != nil || len(set.Service) != 1 || len(set.Metrics) != 1 {
		t.Fatalf("listeners = %+v, %v", set, err)
	}
	set.Close()
}
