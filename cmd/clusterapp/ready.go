package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/ops/units"
)

// readyPoll is how often awaitServing reads the workers it waits for.
const readyPoll = 200 * time.Millisecond

// workerReader is what awaitServing needs of *units.Client.
type workerReader interface {
	Worker(ctx context.Context, unit string) (units.Worker, error)
	UnitJob(ctx context.Context, unit string) (units.Job, bool, error)
}

// notServing is a worker awaitServing gave up on.
type notServing struct {
	Unit string
	Err  error
}

func (e *notServing) Error() string { return fmt.Sprintf("%s is not serving: %v", e.Unit, e.Err) }
func (e *notServing) Unwrap() error { return e.Err }

// awaitServing waits until every one of workers is active, which for a
// Type=notify worker means its process has sent READY=1. A command that
// changed the pool says it is done only then: scale left a worker systemd
// was starting already (a restart after a crash, a start the target pulled
// in) to systemd and said "scaled to N" before it served, or while it kept
// failing.
//
// It returns nil at once when they all are. Otherwise it names those it
// waits for and waits within timeout, reading them every poll: a
// *notServing for the first one that clearly will not come (it failed
// again meanwhile, NRestarts grew; or it is stopped with no job to start
// it), or that timeout passed for; context.Cause(ctx) when ctx ends first.
func awaitServing(ctx context.Context, c workerReader, workers []string, timeout, poll time.Duration, stdout io.Writer) error {
	restarts := map[string]int{} // NRestarts when the wait began
	var pending []string
	for _, u := range workers {
		w, err := readWorker(ctx, c, u)
		if err != nil {
			return err
		}
		if !w.Active() {
			restarts[u] = w.Restarts
			pending = append(pending, u)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	fmt.Fprintf(stdout, "waiting up to %v for %s to serve\n", timeout, strings.Join(pending, ", "))
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; not serving yet: %s", context.Cause(ctx), strings.Join(pending, ", "))
		case <-deadline.C:
			return &notServing{Unit: pending[0], Err: fmt.Errorf("not ready within %v (--timeout)", timeout)}
		case <-tick.C:
		}
		var still []string
		for _, u := range pending {
			w, err := readWorker(ctx, c, u)
			if err != nil {
				return err
			}
			switch {
			case w.Active():
				fmt.Fprintf(stdout, "  %s: pid %d, ready after %v\n", u, w.PID, time.Since(start).Round(time.Millisecond))
			case w.Restarts > restarts[u]:
				return &notServing{Unit: u, Err: fmt.Errorf("it failed again while systemd was starting it (restarts %d -> %d)", restarts[u], w.Restarts)}
			case w.ActiveState == "inactive" || w.ActiveState == "failed":
				qctx, cancel := queryContext(ctx)
				_, queued, err := c.UnitJob(qctx, u)
				cancel()
				if err != nil {
					return err
				}
				if !queued {
					return &notServing{Unit: u, Err: fmt.Errorf("it is %s/%s (result %s) and nothing is starting it", w.ActiveState, w.SubState, w.Result)}
				}
				still = append(still, u)
			default:
				still = append(still, u)
			}
		}
		if pending = still; len(pending) == 0 {
			return nil
		}
	}
}

func readWorker(ctx context.Context, c workerReader, unit string) (units.Worker, error) {
	qctx, cancel := queryContext(ctx)
	defer cancel()
	return c.Worker(qctx, unit)
}
