// Package listen provides the worker's listening sockets.
//
// Under socket activation systemd owns the listening socket
// (clusterapp.socket) and passes every worker a duplicate of it as fd 3 with
// LISTEN_FDS=1 and LISTEN_PID set to the worker's PID. The worker serves on
// its own copy: closing it (to drain) stops this worker from accepting
// without touching the socket systemd and the other workers keep, so
// connections never meet a closed port; they wait in the shared kernel
// backlog for another worker.
//
// Every passed fd is checked before use: it must be a listening stream
// socket. A socket unit with Accept=yes passes one accepted connection
// instead, which Go would otherwise wrap as a "listener" that fails on every
// Accept. A socket in blocking mode is served but logged as a warning: its
// open file description is shared with every worker, and blocking mode has
// been measured to leave Go threads stuck in accept4() (use NonBlocking=yes).
//
// The metrics socket (clusterapp-metrics.socket) is named by its
// FileDescriptorName=metrics (LISTEN_FDNAMES): it is passed to the metrics
// exporter (Passed), and to a worker only by a unit that lists it; every
// other passed socket serves the service, whatever its name, so an operator
// who adds ListenStream= lines to clusterapp.socket gets them all served.
//
// Without LISTEN_FDS the worker binds the configured addresses itself, so
// the binary runs anywhere (`go run ./cmd/clusterapp`).
package listen

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/coreos/go-systemd/v22/activation"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// ErrNotListening reports a passed fd that is not a listening stream socket.
var ErrNotListening = errors.New("listen: passed fd is not a listening stream socket")

// Source says where the listeners came from.
type Source string

const (
	// Activated listeners were passed by systemd.
	Activated Source = "systemd"
	// Bound listeners were opened by the worker itself.
	Bound Source = "self"
)

// env is the seam to the process environment and the activation protocol.
type env struct {
	getenv func(string) string
	getpid func() int
	files  func() []*os.File
}

var stdEnv = env{
	getenv: os.Getenv,
	getpid: os.Getpid,
	files:  func() []*os.File { return activation.Files(true) },
}

// MetricsName is the FileDescriptorName= of the metrics socket.
const MetricsName = "metrics"

// Set is a worker's listeners: the service's and the metrics listener's.
type Set struct {
	Service []net.Listener
	Metrics []net.Listener // none when systemd passed no metrics socket
}

// Close closes every listener (a worker that fails to start).
func (s Set) Close() { closeAll(s.Service); closeAll(s.Metrics) }

// All returns the listeners systemd passed, or, when LISTEN_FDS is not set,
// binds serviceAddr and metricsAddr ("" for none) itself. It fails when
// LISTEN_FDS is set but unusable (LISTEN_PID names another process, an fd is
// not a listening stream socket, no service socket among them), rather than
// silently binding a port of its own.
func All(serviceAddr, metricsAddr string, log *logrus.Entry) (Set, Source, error) {
	return stdEnv.listeners(serviceAddr, metricsAddr, log)
}

func (e env) listeners(serviceAddr, metricsAddr string, log *logrus.Entry) (Set, Source, error) {
	fds := e.getenv("LISTEN_FDS")
	if fds == "" {
		l, err := net.Listen("tcp", serviceAddr)
		if err != nil {
			return Set{}, "", fmt.Errorf("listen on %s: %w", serviceAddr, err)
		}
		set := Set{Service: []net.Listener{l}}
		if metricsAddr != "" {
			ml, err := net.Listen("tcp", metricsAddr)
			if err != nil {
				set.Close()
				return Set{}, "", fmt.Errorf("listen for metrics on %s: %w", metricsAddr, err)
			}
			set.Metrics = []net.Listener{ml}
		}
		return set, Bound, nil
	}
	set, err := e.passed(log)
	if err != nil {
		return Set{}, "", err
	}
	if len(set.Service) == 0 {
		set.Close()
		return Set{}, "", fmt.Errorf("systemd passed only the metrics socket (LISTEN_FDNAMES=%q): expected the service socket too (Sockets=%s)", e.getenv("LISTEN_FDNAMES"), config.SocketUnit)
	}
	return set, Activated, nil
}

// Passed returns the listeners systemd passed, whichever they are (the
// metrics exporter is passed only the metrics socket). It fails when
// LISTEN_FDS is not set or is unusable, as All does.
func Passed(log *logrus.Entry) (Set, error) { return stdEnv.passed(log) }

func (e env) passed(log *logrus.Entry) (Set, error) {
	fds, pid := e.getenv("LISTEN_FDS"), e.getenv("LISTEN_PID")
	if fds == "" {
		return Set{}, errors.New("LISTEN_FDS is not set: systemd passed no sockets")
	}
	if p, err := strconv.Atoi(pid); err != nil || p != e.getpid() {
		return Set{}, fmt.Errorf("LISTEN_FDS=%s is set but LISTEN_PID=%q is not this process (%d): the fds were meant for another process", fds, pid, e.getpid())
	}
	files := e.files()
	if len(files) == 0 {
		return Set{}, fmt.Errorf("LISTEN_FDS=%q passed no file descriptors: expected a positive count", fds)
	}
	var set Set
	for _, f := range files {
		metrics := f.Name() == MetricsName
		l, err := fileListener(f, log)
		if err != nil {
			set.Close()
			return Set{}, err
		}
		if metrics {
			set.Metrics = append(set.Metrics, l)
		} else {
			set.Service = append(set.Service, l)
		}
	}
	return set, nil
}

// fileListener checks f and turns it into a net.Listener; f is closed (the
// listener holds its own duplicate). The checks go through SyscallConn, never
// f.Fd(): Fd switches the descriptor to blocking mode, and the open file
// description is shared with systemd and every other worker.
func fileListener(f *os.File, log *logrus.Entry) (net.Listener, error) {
	defer f.Close()
	var typ, acc, flags int
	var typErr, accErr, flErr error
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) {
			typ, typErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
			acc, accErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
			flags, flErr = unix.FcntlInt(fd, unix.F_GETFL, 0)
		})
	}
	if err != nil || typErr != nil {
		return nil, fmt.Errorf("%s is not a socket: %w", f.Name(), ErrNotListening)
	}
	if accErr != nil || typ != unix.SOCK_STREAM || acc != 1 {
		return nil, fmt.Errorf("%s is a connected or datagram socket, not a listening stream socket (a socket unit with Accept=yes passes connections; clusterapp needs Accept=no and ListenStream=): %w", f.Name(), ErrNotListening)
	}
	if flErr == nil && flags&unix.O_NONBLOCK == 0 {
		log.WithField("name", f.Name()).Warn("inherited socket is in blocking mode; set NonBlocking=yes in the socket unit: a blocking shared socket can leave worker threads stuck in accept")
	}
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("use %s as a listener: %w", f.Name(), err)
	}
	return l, nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		_ = l.Close() // best effort on an error path
	}
}
