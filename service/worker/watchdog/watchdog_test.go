package watchdog

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/logging"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// fakeClock fires deadlines only when the test says so.
type fakeClock struct{ deadline chan time.Time }

func (c fakeClock) After(time.Duration) <-chan time.Time { return c.deadline }
func (c fakeClock) NewTicker(time.Duration) (<-chan time.Time, func()) {
	return make(chan time.Time), func() {}
}

func newPinger(probe func(context.Context) error) (*Pinger, *atomic.Int32, fakeClock, *test.Hook) {
	var pings atomic.Int32
	l, hook := test.NewNullLogger()
	clk := fakeClock{deadline: make(chan time.Time, 1)}
	return &Pinger{
		Interval: time.Second, Timeout: time.Second,
		Probe: probe,
		Ping:  func() error { pings.Add(1); return nil },
		Clock: clk, Log: logrus.NewEntry(l),
	}, &pings, clk, hook
}

func TestPingsWhenHealthy(t *testing.T) {
	p, pings, _, _ := newPinger(func(context.Context) error { return nil })
	for range 3 {
		if err := p.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if pings.Load() != 3 {
		t.Fatalf("pings = %d, want 3", pings.Load())
	}
}

func TestNoPingWhenProbeFails(t *testing.T) {
	p, pings, _, hook := newPinger(func(context.Context) error { return errors.New("503") })
	p.Tick(context.Background())
	p.Tick(context.Background())
	if pings.Load() != 0 {
		t.Fatalf("pinged %d times with a failing probe", pings.Load())
	}
	if len(hook.AllEntries()) != 1 {
		t.Fatalf("failure logged %d times, want once", len(hook.AllEntries()))
	}
	// journalctl MESSAGE_ID= finds it (package logging).
	if id := hook.LastEntry().Data[logging.MessageIDKey]; id != logging.MsgWatchdogProbeFailed {
		t.Fatalf("failed probe logged with message id %v, want %s", id, logging.MsgWatchdogProbeFailed)
	}
}

func TestWedgedProbeStopsPingsUntilItReturns(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var calls atomic.Int32
	p, pings, clk, hook := newPinger(func(context.Context) error {
		calls.Add(1)
		started <- struct{}{}
		<-release // a handler stuck on a lock ignores its context
		return nil
	})
	first := make(chan error)
	go func() { first <- p.Tick(context.Background()) }()
	<-started
	clk.deadline <- time.Now() // the deadline passes while the probe is stuck
	if err := <-first; !errors.Is(err, ErrProbeTimeout) {
		t.Fatalf("first tick: %v, want timeout", err)
	}
	// the stuck probe is not started again
	if err := p.Tick(context.Background()); !errors.Is(err, ErrProbeStuck) {
		t.Fatalf("second tick: %v, want stuck", err)
	}
	if pings.Load() != 0 || calls.Load() != 1 {
		t.Fatalf("pings=%d probes=%d, want 0 and 1", pings.Load(), calls.Load())
	}
	close(release)
	for p.probing.Load() {
		time.Sleep(time.Millisecond)
	}
	go func() { <-started }() // the next probe passes at once
	if err := p.Tick(context.Background()); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if pings.Load() != 1 {
		t.Fatalf("pings after recovery = %d", pings.Load())
	}
	msgs := []string{}
	for _, e := range hook.AllEntries() {
		msgs = append(msgs, e.Message)
	}
	if len(msgs) != 2 {
		t.Fatalf("log = %q, want one failure and one recovery", msgs)
	}
}

func TestSlowProbeThatHonoursContextIsCancelled(t *testing.T) {
	cancelled := make(chan struct{})
	p, _, clk, _ := newPinger(func(ctx context.Context) error {
		<-ctx.Done()
		close(cancelled)
		return ctx.Err()
	})
	clk.deadline <- time.Now()
	if err := p.Tick(context.Background()); !errors.Is(err, ErrProbeTimeout) {
		t.Fatal(err)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("probe context not cancelled at the deadline")
	}
}

func TestEvery(t *testing.T) {
	if i, d := Every(3 * time.Second); i != time.Second || d != time.Second {
		t.Fatalf("Every(3s) = %v, %v", i, d)
	}
}

// A healthy worker whose ping does not reach systemd says so, once, and not
// as a failed health probe; each change of outcome is logged once.
func TestPingFailureReportedApartFromProbeFailure(t *testing.T) {
	probeErr := error(nil)
	p, _, _, hook := newPinger(func(context.Context) error { return probeErr })
	sendErr := errors.New("write: no buffer space")
	p.Ping = func() error { return sendErr }
	for range 3 {
		err := p.Tick(context.Background())
		if !errors.Is(err, ErrPing) || !errors.Is(err, sendErr) {
			t.Fatalf("tick with a failing ping: %v, want ErrPing wrapping the send error", err)
		}
	}
	sendErr = nil
	p.Ping = func() error { return nil }
	p.Tick(context.Background())
	probeErr = errors.New("503")
	p.Tick(context.Background())
	p.Tick(context.Background())
	var msgs []string
	for _, e := range hook.AllEntries() {
		msgs = append(msgs, e.Message)
	}
	want := []string{
		"watchdog ping failed although the health probe passes; systemd restarts this worker if pings keep failing",
		"watchdog pings reach systemd again",
		"health probe failed; withholding watchdog pings so systemd restarts this worker if it does not recover",
	}
	if len(msgs) != len(want) {
		t.Fatalf("log = %q, want %q", msgs, want)
	}
	for i := range want {
		if msgs[i] != want[i] {
			t.Fatalf("log line %d = %q, want %q", i, msgs[i], want[i])
		}
	}
}

// Readers call a worker late half an interval after a ping was due.
func TestLateAfter(t *testing.T) {
	if got := LateAfter(10 * time.Second); got != 5*time.Second {
		t.Errorf("LateAfter(10s) = %v, want 5s (a ping every 3.3s, 1.5 intervals)", got)
	}
	if got := LateAfter(0); got != 0 {
		t.Errorf("LateAfter(0) = %v", got)
	}
}
