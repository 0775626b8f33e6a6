package rollout

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

// fakeManager records the order of restarts and how many overlap; restarts
// of the units in fail return an error.
type fakeManager struct {
	mu          sync.Mutex
	started     []string
	running     int
	maxRunning  int
	fail        map[string]error
	restartTime time.Duration
}

func (f *fakeManager) Restart(ctx context.Context, unit string) error {
	f.mu.Lock()
	f.started = append(f.started, unit)
	f.running++
	f.maxRunning = max(f.maxRunning, f.running)
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.running--; f.mu.Unlock() }()
	select {
	case <-time.After(f.restartTime):
	case <-ctx.Done():
		return ctx.Err()
	}
	return f.fail[unit]
}

func workers(n int) []string {
	var us []string
	for i := 1; i <= n; i++ {
		us = append(us, fmt.Sprintf("w%d", i))
	}
	return us
}

func TestOneAtATimeInOrder(t *testing.T) {
	f := &fakeManager{restartTime: 5 * time.Millisecond}
	var done []string
	err := Run(context.Background(), workers(4), f, Options{Done: func(u string, _ time.Duration) { done = append(done, u) }})
	if err != nil || !reflect.DeepEqual(f.started, workers(4)) || !reflect.DeepEqual(done, workers(4)) || f.maxRunning != 1 {
		t.Fatalf("err %v, started %v, done %v, max concurrent %d; want all in order, one at a time", err, f.started, done, f.maxRunning)
	}
}

func TestStopsAtFirstFailure(t *testing.T) {
	why := errors.New("job failed")
	f := &fakeManager{fail: map[string]error{"w2": why}}
	err := Run(context.Background(), workers(4), f, Options{})
	var fl *Failure
	if !errors.As(err, &fl) || fl.Unit != "w2" || !errors.Is(err, why) {
		t.Fatalf("got %v, want a failure of w2 wrapping the job error", err)
	}
	if !reflect.DeepEqual(f.started, []string{"w1", "w2"}) || !reflect.DeepEqual(fl.NotRestarted, []string{"w3", "w4"}) {
		t.Fatalf("started %v, not restarted %v; want w1,w2 and w3,w4", f.started, fl.NotRestarted)
	}
	if want := "restart of w2 failed: job failed; not restarted: w3, w4"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestMaxUnavailable(t *testing.T) {
	for _, k := range []int{2, 3} {
		f := &fakeManager{restartTime: 20 * time.Millisecond}
		if err := Run(context.Background(), workers(6), f, Options{MaxUnavailable: k}); err != nil {
			t.Fatal(err)
		}
		// Six 20ms restarts with k slots overlap exactly k at a time.
		if f.maxRunning != k || len(f.started) != 6 {
			t.Errorf("k=%d: max concurrent %d, started %v", k, f.maxRunning, f.started)
		}
	}
}

func TestMaxUnavailableStopsLaunching(t *testing.T) {
	f := &fakeManager{restartTime: 10 * time.Millisecond, fail: map[string]error{"w1": errors.New("boom")}}
	err := Run(context.Background(), workers(6), f, Options{MaxUnavailable: 2})
	var fl *Failure
	if !errors.As(err, &fl) || fl.Unit != "w1" {
		t.Fatalf("got %v", err)
	}
	// w1 and w2 were in flight together; nothing after w3 may start.
	if len(f.started) > 3 || len(f.started)+len(fl.NotRestarted) != 6 {
		t.Fatalf("started %v, not restarted %v", f.started, fl.NotRestarted)
	}
}

func TestTimeoutPerWorker(t *testing.T) {
	f := &fakeManager{restartTime: time.Hour}
	err := Run(context.Background(), workers(2), f, Options{Timeout: 10 * time.Millisecond})
	var fl *Failure
	if !errors.As(err, &fl) || fl.Unit != "w1" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want w1 timed out", err)
	}
}

func TestNothingToDo(t *testing.T) {
	if err := Run(context.Background(), nil, &fakeManager{}, Options{}); !errors.Is(err, ErrNothingToDo) {
		t.Fatalf("got %v", err)
	}
}

// Canceling the rollout (Ctrl-C, SIGTERM) starts no further restart, sees
// the one in progress through (systemd finishes its job whether or not
// anyone waits; the report must say how it ended) and names the workers
// left on their old process. It used to return at once, the restart in
// progress abandoned as "canceled".
func TestInterruptedWaitsForTheRestartInProgress(t *testing.T) {
	f := &fakeManager{restartTime: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	var done []string
	go func() {
		for {
			f.mu.Lock()
			n := len(f.started)
			f.mu.Unlock()
			if n == 2 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	err := Run(ctx, workers(4), f, Options{Done: func(u string, _ time.Duration) { done = append(done, u) }})
	var in *Interrupted
	if !errors.As(err, &in) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want *Interrupted wrapping context.Canceled", err)
	}
	if !reflect.DeepEqual(done, []string{"w1", "w2"}) || !reflect.DeepEqual(in.NotRestarted, []string{"w3", "w4"}) {
		t.Fatalf("done %v, not restarted %v; want w1,w2 seen through and w3,w4 left", done, in.NotRestarted)
	}
	if want := "interrupted; not restarted: w3, w4"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

// A rollout canceled before it starts restarts nothing (the select between
// a free slot and the canceled context used to pick either).
func TestCanceledBeforeStartRestartsNothing(t *testing.T) {
	for range 20 {
		f := &fakeManager{}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var in *Interrupted
		if err := Run(ctx, workers(2), f, Options{}); !errors.As(err, &in) || len(f.started) != 0 || len(in.NotRestarted) != 2 {
			t.Fatalf("got %v, started %v", err, f.started)
		}
	}
}
