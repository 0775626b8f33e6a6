// Package rollout restarts a pool of workers a few at a time, each restart
// gated on the new process being ready, and stops at the first failure.
//
// systemd has no rolling restart of template instances: `systemctl restart
// clusterapp.target` restarts every worker at once (connections then wait in
// the socket's backlog until a new worker is ready), and restarting the
// instances one after the other by hand does not wait for readiness
// unless each job is waited for. Here each restart is a job whose
// completion the Restarter waits for; for Type=notify units that is the new
// process's READY=1. At most MaxUnavailable workers are restarting at any
// moment, so the rest keep accepting from the shared socket; with the
// worker's lossless drain no request fails.
//
// The first failed restart stops the rollout: workers not yet started are
// left alone (still running the old code), restarts already in progress are
// waited for, and the error names the worker. An interruption (the context
// ending) stops it the same way.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Restarter restarts one unit and returns when it is ready again, or with
// the reason it is not. *units.Client is the production one.
type Restarter interface {
	Restart(ctx context.Context, unit string) error
}

// Options for Run.
type Options struct {
	// MaxUnavailable is how many workers may restart at once; default 1.
	MaxUnavailable int
	// Timeout bounds each worker's restart; default 2 minutes (longer than
	// the units' TimeoutStopSec= plus TimeoutStartSec=, so systemd's own
	// timeouts decide first).
	Timeout time.Duration
	// Done, when set, is called after each successful restart.
	Done func(unit string, took time.Duration)
}

// Failure is a rollout stopped by one worker's failed restart.
type Failure struct {
	Unit string
	Err  error
	// NotRestarted lists the workers left on the old process.
	NotRestarted []string
}

func (f *Failure) Error() string {
	msg := fmt.Sprintf("restart of %s failed: %v", f.Unit, f.Err)
	if len(f.NotRestarted) > 0 {
		msg += "; not restarted: " + strings.Join(f.NotRestarted, ", ")
	}
	return msg
}

func (f *Failure) Unwrap() error { return f.Err }

// Interrupted is a rollout stopped by its context (an operator's Ctrl-C, a
// SIGTERM) before every worker was restarted. The restarts in progress were
// seen through first.
type Interrupted struct {
	// Err is the context's cause.
	Err error
	// NotRestarted lists the workers left on the old process.
	NotRestarted []string
}

// Error leaves the cause out (callers say what interrupted them first); it
// is there for errors.Is.
func (i *Interrupted) Error() string {
	return "interrupted; not restarted: " + strings.Join(i.NotRestarted, ", ")
}

func (i *Interrupted) Unwrap() error { return i.Err }

// ErrNothingToDo is returned when units is empty.
var ErrNothingToDo = errors.New("no running worker to restart")

// Run restarts units in order, at most opts.MaxUnavailable at a time.
// It returns nil when every unit restarted, a *Failure for the first unit
// that did not (in order of failure), or an *Interrupted when ctx ended
// first. Once ctx ends no further restart starts, but those in progress
// are waited for (each still bounded by opts.Timeout): systemd finishes a
// job whether or not anyone waits for it, and the caller must be able to
// say how each one ended.
func Run(ctx context.Context, units []string, r Restarter, opts Options) error {
	if len(units) == 0 {
		return ErrNothingToDo
	}
	opts = opts.withDefaults()
	var (
		mu      sync.Mutex
		failure *Failure
		wg      sync.WaitGroup
	)
	slots := make(chan struct{}, opts.MaxUnavailable)
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return failure != nil }
	next := 0
	for ; next < len(units) && takeSlot(ctx, slots); next++ {
		if failed() {
			<-slots
			break
		}
		wg.Add(1)
		go func(unit string) {
			defer wg.Done()
			defer func() { <-slots }()
			if err := restartOne(context.WithoutCancel(ctx), r, unit, opts); err != nil {
				mu.Lock()
				if failure == nil {
					failure = &Failure{Unit: unit, Err: err}
				}
				mu.Unlock()
			}
		}(units[next])
	}
	wg.Wait()
	left := units[next:]
	switch {
	case failure != nil:
		failure.NotRestarted = left
		return failure
	case len(left) > 0:
		return &Interrupted{Err: context.Cause(ctx), NotRestarted: left}
	}
	return nil
}

// takeSlot waits for a free slot; false, holding none, once ctx has ended
// (a select between the two would pick either when both are ready).
func takeSlot(ctx context.Context, slots chan struct{}) bool {
	if ctx.Err() != nil {
		return false
	}
	select {
	case slots <- struct{}{}:
		if ctx.Err() != nil {
			<-slots
			return false
		}
		return true
	case <-ctx.Done():
		return false
	}
}

func restartOne(ctx context.Context, r Restarter, unit string, opts Options) error {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	start := time.Now()
	if err := r.Restart(ctx, unit); err != nil {
		return err
	}
	if opts.Done != nil {
		opts.Done(unit, time.Since(start))
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.MaxUnavailable < 1 {
		o.MaxUnavailable = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	return o
}
