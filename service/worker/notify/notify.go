// Package notify speaks the sd_notify protocol to systemd for a Type=notify
// unit: READY=1 once the worker serves, STATUS= lines shown by `systemctl
// status`, STOPPING=1 when it drains, WATCHDOG=1 pings.
//
// Transport: one unixgram socket connected to $NOTIFY_SOCKET (a path, or an
// abstract address starting with '@') is dialled when the Notifier is made
// and reused for every message. daemon.SdNotify dials a new socket per
// message instead, so a worker at its open-file limit (a client can hold
// LimitNOFILE connections open) failed every WATCHDOG=1 with EMFILE and was
// killed by the watchdog although it was healthy. A send that fails on the
// connection (ECONNREFUSED once systemd's socket is gone or re-created) drops
// it and dials once more.
//
// A connected socket is as good as a fresh one for NotifyAccess=main: systemd
// sets SO_PASSCRED on its end, so the kernel attaches the sender's
// credentials (SCM_CREDENTIALS: PID, UID, GID) to each datagram when it is
// sent, not when the socket was connected. The socket is close-on-exec, so no
// child process can speak for the worker with it.
//
// Outside systemd (no NOTIFY_SOCKET) every call is a no-op. The variable is
// never unset (daemon.SdNotify(true, ...) would): a Notifier made later, such
// as the crash-loop status line, reads it again.
package notify

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/sirupsen/logrus"
)

// Notifier sends notifications to systemd. The zero value is not usable; use New.
type Notifier struct {
	send     func(state string) (bool, error)
	sock     *socket // nil without NOTIFY_SOCKET, or with NewWith
	log      *logrus.Entry
	mu       sync.Mutex
	failing  bool   // the last send failed; the failure was logged once
	lastStat string // the last STATUS= sent, to skip repeats
}

// New returns a Notifier that writes to $NOTIFY_SOCKET, dialled now and
// reused for every message; without NOTIFY_SOCKET every message is a no-op.
// A dial that fails now is retried, and reported, by the first message.
// Close releases the socket.
func New(log *logrus.Entry) *Notifier {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return &Notifier{send: func(string) (bool, error) { return false, nil }, log: log}
	}
	sock := newSocket(path, dialUnixgram)
	send := func(state string) (bool, error) {
		if err := sock.send([]byte(state)); err != nil {
			return false, err
		}
		return true, nil
	}
	return &Notifier{send: send, sock: sock, log: log}
}

// NewWith returns a Notifier that hands every message to send, which must
// behave like daemon.SdNotify: (false, nil) when there is no socket.
func NewWith(send func(state string) (bool, error), log *logrus.Entry) *Notifier {
	return &Notifier{send: send, log: log}
}

// Close releases the notify socket; messages sent after it return
// ErrClosed. It is a no-op for a Notifier without a socket.
func (n *Notifier) Close() error {
	if n.sock == nil {
		return nil
	}
	if err := n.sock.close(); err != nil {
		return fmt.Errorf("close notify socket: %w", err)
	}
	return nil
}

// Ready tells systemd the worker is serving (READY=1) and sets its status.
func (n *Notifier) Ready(status string) error {
	return n.notify(daemon.SdNotifyReady + "\nSTATUS=" + status)
}

// Stopping tells systemd the worker is draining (STOPPING=1).
func (n *Notifier) Stopping(status string) error {
	return n.notify(daemon.SdNotifyStopping + "\nSTATUS=" + status)
}

// Status sets the line `systemctl status` shows; repeats are not sent.
func (n *Notifier) Status(status string) error {
	n.mu.Lock()
	same := status == n.lastStat
	n.lastStat = status
	n.mu.Unlock()
	if same {
		return nil
	}
	return n.notify("STATUS=" + status)
}

// Watchdog sends a WATCHDOG=1 keep-alive ping.
func (n *Notifier) Watchdog() error {
	return n.notify(daemon.SdNotifyWatchdog)
}

// notify sends state; a failure is logged once until a send succeeds again,
// so a broken socket does not fill the journal at every ping. A message
// after Close (a status tick racing the exit) is not logged.
func (n *Notifier) notify(state string) error {
	_, err := n.send(state)
	if errors.Is(err, ErrClosed) {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		if !n.failing {
			n.log.WithError(err).Warn("sd_notify failed")
		}
		n.failing = true
		return fmt.Errorf("sd_notify: %w", err)
	}
	n.failing = false
	return nil
}

// WatchdogInterval returns systemd's watchdog timeout (WatchdogSec=) for this
// process, or 0 when the watchdog is off or meant for another PID.
func WatchdogInterval() (time.Duration, error) {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return 0, fmt.Errorf("read WATCHDOG_USEC: %w", err)
	}
	return d, nil
}
