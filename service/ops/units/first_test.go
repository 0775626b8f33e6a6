package units

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeFirst is worker 1's ActiveState on a fake monotonic clock that the
// reads advance: each read costs a poll, and states[i] is what read i
// returns (the last one holds).
type fakeFirst struct {
	clock  time.Duration
	states []string
	reads  int
}

func (f *fakeFirst) now() time.Duration { return f.clock }

func (f *fakeFirst) state(context.Context) (string, error) {
	f.clock += firstPoll
	s := f.states[min(f.reads, len(f.states)-1)]
	f.reads++
	return s, nil
}

func TestAwaitFirst(t *testing.T) {
	const t0 = 10 * time.Hour // the clock when the wait begins
	late := "starting for longer than 1s"
	for _, tc := range []struct {
		name   string
		first  Activation
		states []string
		why    string
		reads  int
	}{
		{name: "worker 1 is serving: no wait (a crash or a rollout of worker 2)",
			first: Activation{State: "active", Since: time.Hour}, why: "active"},
		{name: "a cold start: wait until worker 1 is up",
			first: Activation{State: "activating", Since: t0 - 20*time.Millisecond}, states: []string{"activating", "activating", "active"}, why: "active", reads: 3},
		{name: "worker 1 fails: no more wait",
			first: Activation{State: "activating", Since: t0}, states: []string{"activating", "deactivating"}, why: "deactivating", reads: 2},
		{name: "systemd restarts worker 1 after a failure (a crash loop, a bad file): no wait",
			first: Activation{State: "activating", Since: t0, Restarts: 3}, why: "restarting after a failure"},
		{name: "worker 1 has been starting for 5 s (an operator's start that hangs): no wait",
			first: Activation{State: "activating", Since: t0 - 5*time.Second}, why: late},
		{name: "worker 1 hangs before READY=1: wait until its start is a second old, then start",
			first: Activation{State: "activating", Since: t0 - 100*time.Millisecond}, states: []string{"activating"}, why: late, reads: int((FirstLimit - 100*time.Millisecond) / firstPoll)},
		{name: "worker 1's start job is queued: wait for it",
			first: Activation{State: "inactive", Queued: true}, states: []string{"inactive", "activating", "active"}, why: "active", reads: 3},
		{name: "worker 1's start job stays queued: wait a second at most",
			first: Activation{State: "inactive", Queued: true}, states: []string{"inactive"}, why: late, reads: int(FirstLimit / firstPoll)},
		{name: "worker 1 stopped, nothing queued: no wait",
			first: Activation{State: "inactive"}, why: "inactive"},
		{name: "worker 1 failed, nothing queued: no wait",
			first: Activation{State: "failed"}, why: "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeFirst{clock: t0, states: tc.states}
			why, waited, err := AwaitFirst(context.Background(), tc.first, f.state, f.now, FirstLimit)
			if err != nil || why != tc.why || f.reads != tc.reads {
				t.Fatalf("why %q (want %q), %d reads (want %d), err %v", why, tc.why, f.reads, tc.reads, err)
			}
			if waited != time.Duration(f.reads)*firstPoll {
				t.Fatalf("waited %s after %d reads", waited, f.reads)
			}
		})
	}
}

// A stop of the waiting worker (its context) or a failed read ends the
// wait at once, with the error.
func TestAwaitFirstEnds(t *testing.T) {
	first := Activation{State: "activating", Since: time.Hour}
	f := &fakeFirst{clock: time.Hour, states: []string{"activating"}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := AwaitFirst(ctx, first, f.state, f.now, FirstLimit); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	boom := errors.New("connection reset")
	fail := func(context.Context) (string, error) { return "", boom }
	if _, _, err := AwaitFirst(context.Background(), first, fail, f.now, FirstLimit); !errors.Is(err, boom) {
		t.Fatalf("err %v, want %v", err, boom)
	}
}
