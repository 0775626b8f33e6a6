// Package notify speaks the sd_notify protocol to systemd for a Type=notify
// unit: READY=1 once the worker serves, STATUS= lines shown by `systemctl
// status`, STOPPING=1 when it drains, WATCHDOG=1 pings.
//
// Outside systemd (no NOTIFY_SOCKET) every call is a no-op. The socket is
// never unset (SdNotify's unsetEnvironment is always false): unsetting it
// after READY would silence every later watchdog ping, and systemd would kill
// a healthy worker.
package notify

import (
	"fmt"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/sirupsen/logrus"
)

// Notifier sends notifications to systemd. The zero value is not usable; use New.
type Notifier struct {
	send     func(state string) (bool, error)
	log      *logrus.Entry
	mu       sync.Mutex
	failing  bool   // the last send failed; the failure was logged once
	lastStat string // the last STATUS= sent, to skip repeats
}

// New returns a Notifier that writes to $NOTIFY_SOCKET.
func New(log *logrus.Entry) *Notifier {
	return &Notifier{send: func(s string) (bool, error) { return daemon.SdNotify(false, s) }, log: log}
}

// NewWith returns a Notifier that hands every message to send, which must
// behave like daemon.SdNotify: (false, nil) when there is no socket.
func NewWith(send func(state string) (bool, error), log *logrus.Entry) *Notifier {
	return &Notifier{send: send, log: log}
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
// so a broken socket does not fill the journal at every ping.
func (n *Notifier) notify(state string) error {
	_, err := n.send(state)
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
