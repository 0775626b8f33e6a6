package units

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Worker 1 comes up first, and nothing else waits for it.
//
// A cold start (the first connection, boot, a start of the target) is one
// transaction that starts every worker at once: worker 1 pulls in
// clusterapp.target, which wants workers 2..N, and their hardened spawns
// share the CPUs with worker 1's while the connection that started it
// waits. An ordering (Before= on worker 1) fixed that, but systemd applies
// an ordering to every pair of jobs, not to one transaction: while worker
// 1 had a start job (a restart back-off, a bad configuration, a hang before
// READY=1), every restart of another worker waited behind it, and a worker
// 1 failing in a loop held them up for good (measured: worker 2, killed
// while worker 1 failed on a setting of its own, was still down 44 s
// later, its start job waiting through each of worker 1's).
//
// So workers 2..N wait in their own start job instead (the generator's
// ExecStartPre=, `clusterapp await-first`), and only for a start that was
// asked for (NRestarts is 0: the first connection, boot, an operator's
// start or restart), never for systemd restarting a worker 1 that failed
// (NRestarts counts those), and at most until worker 1's start is a limit
// old: a worker 1 that hangs before READY=1 costs the others that much.

// FirstLimit is how old worker 1's activation may be for another worker to
// wait for it: a cold start takes about 100 ms on 2 CPUs (docs/benchmarks.md).
const FirstLimit = time.Second

// firstPoll is how often the waiting worker reads worker 1's state: each
// read is a call that systemd, busy starting the pool, answers.
const firstPoll = 10 * time.Millisecond

// Activation is a unit's state and, while it is activating, since when on
// CLOCK_MONOTONIC (InactiveExitTimestampMonotonic). Queued: a job waits
// for the unit (its Job property), so an inactive unit is about to start.
// Restarts is the service's NRestarts: systemd's restarts after a failure
// since the last start that was asked for.
type Activation struct {
	State    string
	Since    time.Duration
	Queued   bool
	Restarts uint64
}

// Activation reads unit's Activation, property by property: the whole
// set is a large message to build for a manager busy starting units.
func (c *Client) Activation(ctx context.Context, unit string) (Activation, error) {
	var a Activation
	var err error
	if a.State, err = c.ActiveState(ctx, unit); err != nil {
		return a, err
	}
	since, err := c.conn.GetUnitPropertyContext(ctx, unit, "InactiveExitTimestampMonotonic")
	if err != nil {
		return a, fmt.Errorf("InactiveExitTimestampMonotonic of %s: %w", unit, err)
	}
	a.Since = time.Duration(num(since.Value.Value())) * time.Microsecond
	job, err := c.conn.GetUnitPropertyContext(ctx, unit, "Job")
	if err != nil {
		return a, fmt.Errorf("job of %s: %w", unit, err)
	}
	// Job is (id, object path); id 0 is no job.
	if v, ok := job.Value.Value().([]any); ok && len(v) > 0 {
		id, _ := v[0].(uint32)
		a.Queued = id != 0
	}
	n, err := c.conn.GetServicePropertyContext(ctx, unit, "NRestarts")
	if err != nil {
		return a, fmt.Errorf("NRestarts of %s: %w", unit, err)
	}
	a.Restarts = num(n.Value.Value())
	return a, nil
}

// ActiveState reads unit's ActiveState alone.
func (c *Client) ActiveState(ctx context.Context, unit string) (string, error) {
	p, err := c.conn.GetUnitPropertyContext(ctx, unit, "ActiveState")
	if err != nil {
		return "", fmt.Errorf("state of %s: %w", unit, err)
	}
	return str(p.Value.Value()), nil
}

// Monotonic is CLOCK_MONOTONIC, the clock of systemd's *Monotonic
// timestamps.
func Monotonic() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// AwaitFirst waits while worker 1, as first reads it, is activating and
// its start is younger than limit, or is about to start (a job queued;
// then for limit at most), unless systemd is restarting it after a
// failure. state reads its ActiveState again, every firstPoll; now is
// CLOCK_MONOTONIC (Monotonic). It returns why it stopped waiting
// ("active", "failed", "restarting after a failure", "starting for longer
// than 1s", ...) and how long it waited. An error of state or the end of
// ctx ends the wait.
func AwaitFirst(ctx context.Context, first Activation, state func(context.Context) (string, error), now func() time.Duration, limit time.Duration) (why string, waited time.Duration, err error) {
	start := now()
	var deadline time.Duration
	switch {
	case first.State == "active" || first.State == "reloading":
		return first.State, 0, nil
	case first.Restarts > 0:
		return "restarting after a failure", 0, nil
	case first.State == "activating" && first.Since != 0:
		deadline = first.Since + limit
	case first.State == "activating", first.Queued:
		deadline = start + limit
	default:
		return first.State, 0, nil
	}
	waiting := map[string]bool{"activating": true, first.State: true}
	late := fmt.Sprintf("starting for longer than %s", limit)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		if now() >= deadline {
			return late, now() - start, nil
		}
		t.Reset(min(firstPoll, deadline-now()))
		select {
		case <-ctx.Done():
			return "", now() - start, ctx.Err()
		case <-t.C:
		}
		s, err := state(ctx)
		if err != nil {
			return "", now() - start, err
		}
		if !waiting[s] {
			return s, now() - start, nil
		}
	}
}
