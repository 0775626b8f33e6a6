// Package watchdog keeps systemd's watchdog (WatchdogSec=) fed only while the
// worker can really serve.
//
// A ticker goroutine that pings no matter what proves only that the Go
// runtime still schedules goroutines; a worker whose handlers are deadlocked
// would be kept alive forever. Instead, every tick runs a health probe through
// the same handler stack a client reaches and pings WATCHDOG=1 only when the
// probe succeeds within a deadline. A wedged worker stops pinging, systemd
// kills it with SIGABRT (Go then prints every goroutine's stack into the
// journal) and Restart= starts a fresh one.
//
// A probe that never returns is not started again on the next tick: one
// stuck probe is enough to stop pinging, and piling up goroutines behind the
// same deadlock would only leak memory until systemd acts.
//
// A ping that fails after a passing probe is reported as what it is: the
// worker is healthy but systemd did not hear it (the notify socket is
// broken), which calls for a different fix than a wedged handler. Each kind
// of failure is logged once per episode, and so is the recovery.
package watchdog

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/logging"
	"github.com/sirupsen/logrus"
)

// ErrProbeStuck reports that an earlier probe has still not returned.
var ErrProbeStuck = errors.New("watchdog: previous health probe has not returned")

// ErrProbeTimeout reports a probe that missed its deadline.
var ErrProbeTimeout = errors.New("watchdog: health probe timed out")

// ErrPing wraps a failed WATCHDOG=1 ping after a passing probe.
var ErrPing = errors.New("watchdog: ping failed")

// Clock is the source of the ticks and the probe deadlines, injected so
// tests fire them. It holds timers only: the watchdog reads no wall clock,
// so it takes no Now (the seam of the worker's other packages).
type Clock interface {
	After(d time.Duration) <-chan time.Time
	NewTicker(d time.Duration) (ticks <-chan time.Time, stop func())
}

type realClock struct{}

func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (realClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Pinger probes health and pings systemd's watchdog.
type Pinger struct {
	// Interval between probes. systemd's docs advise pinging at half the
	// timeout; Interval derives from WatchdogSec= in Every.
	Interval time.Duration
	// Timeout is the probe's deadline; a slower probe counts as failed.
	Timeout time.Duration
	// Probe checks that the worker can serve.
	Probe func(ctx context.Context) error
	// Ping tells systemd the worker is alive (WATCHDOG=1).
	Ping func() error
	// Clock defaults to the real clock.
	Clock Clock
	Log   *logrus.Entry

	probing atomic.Bool // a probe goroutine is running
	state   outcome     // how the last tick ended; each change is logged once
}

// outcome is how a tick ended.
type outcome int

const (
	pinged      outcome = iota // the probe passed and the ping was sent
	probeFailed                // no ping: the worker cannot serve
	pingFailed                 // the worker can serve, but the ping did not reach systemd
)

// Every returns the interval and probe deadline for a watchdog timeout:
// a tick every third of the timeout, so one slow or failed probe is not yet
// fatal, and a deadline of one tick.
func Every(watchdogTimeout time.Duration) (interval, deadline time.Duration) {
	interval = watchdogTimeout / 3
	return interval, interval
}

// LateAfter is how long after its last ping a worker whose watchdog timeout
// is watchdogTimeout counts as not making progress (frozen, or hung): one
// and a half probe intervals. A healthy worker pings every interval, a few
// milliseconds after its tick; a probe slow enough to push a ping half an
// interval late is already a sick worker. The readers (status, doctor, the
// metrics scrape) use it so an operator learns of a stall seconds before
// systemd's kill, not after it. 0 when the watchdog is off.
func LateAfter(watchdogTimeout time.Duration) time.Duration {
	return watchdogTimeout / 2 // 1.5 x Every's third, without its rounding
}

// Run ticks until ctx is done.
func (p *Pinger) Run(ctx context.Context) {
	ticks, stop := p.clock().NewTicker(p.Interval)
	defer stop()
	p.Tick(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			p.Tick(ctx)
		}
	}
}

// Tick runs one probe and pings when it passes. It returns the probe's
// error, or the ping's wrapped in ErrPing.
func (p *Pinger) Tick(ctx context.Context) error {
	if err := p.probe(ctx); err != nil {
		p.report(probeFailed, err)
		return err
	}
	if err := p.Ping(); err != nil {
		err = fmt.Errorf("%w: %w", ErrPing, err)
		p.report(pingFailed, err)
		return err
	}
	p.report(pinged, nil)
	return nil
}

func (p *Pinger) probe(ctx context.Context) error {
	if !p.probing.CompareAndSwap(false, true) {
		return ErrProbeStuck
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1) // buffered: a late probe must not block forever
	go func() {
		defer p.probing.Store(false)
		done <- p.Probe(pctx)
	}()
	select {
	case err := <-done:
		cancel()
		if err != nil {
			return fmt.Errorf("health probe: %w", err)
		}
		return nil
	case <-p.clock().After(p.Timeout):
		cancel() // a probe that honours its context returns; a wedged one does not
		return fmt.Errorf("%w after %s", ErrProbeTimeout, p.Timeout)
	}
}

// report logs a change of outcome; a repeat is not logged again.
func (p *Pinger) report(o outcome, err error) {
	if o == p.state {
		return
	}
	switch o {
	case probeFailed:
		p.Log.WithError(err).WithFields(logging.Event(logging.MsgWatchdogProbeFailed)).Error("health probe failed; withholding watchdog pings so systemd restarts this worker if it does not recover")
	case pingFailed:
		p.Log.WithError(err).Error("watchdog ping failed although the health probe passes; systemd restarts this worker if pings keep failing")
	case pinged:
		if p.state == probeFailed {
			p.Log.Info("health probe passes again; watchdog pings resumed")
		} else {
			p.Log.Info("watchdog pings reach systemd again")
		}
	}
	p.state = o
}

func (p *Pinger) clock() Clock {
	if p.Clock == nil {
		return realClock{}
	}
	return p.Clock
}
