package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/clusterapp/clusterapp/service/ops/units"
)

// poolJobs runs the jobs of a command that changes the pool (reload,
// scale) without fighting a job someone else holds on the same worker.
//
// reload and scale take turns on the pool lock (oplock), but `systemctl
// restart` or `stop` by hand takes none: such a job on a worker a reload
// was about to restart was canceled by the reload's job, or canceled it,
// and the pool could end with that worker down after a reload that said
// it was done. So before its job on a worker a command waits for a job
// someone else holds there, saying so, and reads the worker's state again;
// its own start and restart jobs are submitted in "fail" mode, so that a
// stop queued in between makes them fail rather than be canceled. When its
// job is canceled or refused all the same, it names the job that took its
// place, waits for it, and tries once more.
type poolJobs struct {
	c   jobClient
	out io.Writer
	// interrupted is the command's context, ended by an interruption
	// (interruptible); the jobs get one that is not. Waiting for someone
	// else's job is no job in progress: an interruption ends that wait,
	// and no job of ours starts after it. nil for never.
	interrupted context.Context
}

// jobClient is what poolJobs needs of *units.Client.
type jobClient interface {
	UnitJob(ctx context.Context, unit string) (units.Job, bool, error)
	AwaitJob(ctx context.Context, j units.Job) error
	Worker(ctx context.Context, unit string) (units.Worker, error)
	Start(ctx context.Context, unit string) error
	Stop(ctx context.Context, unit string) error
	Restart(ctx context.Context, unit string) error
}

// errLeft is a job not run, because the worker was found as the job would
// leave it, or being started by systemd; poolJobs has said which.
var errLeft = errors.New("left as it is")

// Restart restarts unit (see poolJobs). A worker is restarted whatever
// state another job left it in: the restart is what gives it a process
// started now, and a start for one that was stopped.
func (p *poolJobs) Restart(ctx context.Context, unit string) error {
	return p.run(ctx, "restart", unit, p.c.Restart, func(units.Worker) string { return "" })
}

// Start starts unit (see poolJobs); errLeft when, after another job, it is
// active, or being started by systemd (a crash loop's restarts: a start
// job on it fails at once or waits for good).
func (p *poolJobs) Start(ctx context.Context, unit string) error {
	return p.run(ctx, "start", unit, p.c.Start, func(w units.Worker) string {
		switch {
		case w.Active():
			return "serving: not started again"
		case w.ActiveState != "inactive" && w.ActiveState != "failed":
			return "being started by systemd: left to it"
		}
		return ""
	})
}

// Stop drains and stops unit (see poolJobs); errLeft when, after another
// job, it is stopped already.
func (p *poolJobs) Stop(ctx context.Context, unit string) error {
	return p.run(ctx, "stop", unit, p.c.Stop, func(w units.Worker) string {
		if w.ActiveState == "inactive" || w.ActiveState == "failed" {
			return "stopped already"
		}
		return ""
	})
}

// run runs job on unit, waiting first for a job someone else holds there;
// after one, leave says why the job is not needed ("" when it is).
func (p *poolJobs) run(ctx context.Context, op, unit string, job func(context.Context, string) error, leave func(units.Worker) string) error {
	for attempt := 1; ; attempt++ {
		waited, err := p.awaitForeign(ctx, unit)
		if err != nil {
			return fmt.Errorf("%s %s: %w", op, unit, err)
		}
		if waited {
			qctx, cancel := queryContext(ctx)
			w, err := p.c.Worker(qctx, unit)
			cancel()
			if err != nil {
				return fmt.Errorf("%s %s: %w", op, unit, err)
			}
			if why := leave(w); why != "" {
				fmt.Fprintf(p.out, "  %s is %s/%s after that job: %s\n", unit, w.ActiveState, w.SubState, why)
				return errLeft
			}
			fmt.Fprintf(p.out, "  %s is %s/%s after that job: %s now\n", unit, w.ActiveState, w.SubState, gerund(op))
		}
		err = job(ctx, unit)
		if err == nil || ctx.Err() != nil {
			return err
		}
		displaced, why := p.displaced(ctx, op, unit, err)
		if !displaced {
			return err
		}
		if cause := p.stopped(); cause != nil {
			return fmt.Errorf("%w (%s); %w: not tried again", err, why, cause)
		}
		if attempt == 2 {
			return fmt.Errorf("%w, a second time (%s): something keeps acting on %s; see systemctl list-jobs, then run the command again", err, why, unit)
		}
		fmt.Fprintf(p.out, "  our %s of %s was %s: trying once more\n", op, unit, why)
	}
}

// displaced reports whether err is the command's job on unit canceled by
// another job (result "canceled") or refused because of one ("fail" mode),
// and what systemd says of that job: systemd does not record who submitted
// a job, but the job that took the place of a canceled one is the unit's
// job now.
func (p *poolJobs) displaced(ctx context.Context, op, unit string, err error) (bool, string) {
	var jerr *units.JobError
	canceled := errors.As(err, &jerr) && jerr.Result == "canceled"
	if jerr != nil && !canceled {
		return false, "" // failed, timeout, ...: the worker's own doing
	}
	qctx, cancel := queryContext(ctx)
	defer cancel()
	j, ok, qerr := p.c.UnitJob(qctx, unit)
	switch {
	case qerr != nil || (!ok && !canceled):
		return false, ""
	case !ok:
		return true, "canceled by another job, already finished (systemd does not say whose)"
	case canceled:
		return true, fmt.Sprintf("canceled by a systemctl job (%s) queued over it", j)
	}
	return true, fmt.Sprintf("refused by systemd: a systemctl job (%s) was queued meanwhile", j)
}

// awaitForeign waits, within ctx, while someone else holds a job on unit,
// saying so; true when it waited. systemd's own restart of a worker that
// failed (a start job once NRestarts is above 0: a crash loop) is not
// waited for: it never ends by itself, and the job at hand ends it.
func (p *poolJobs) awaitForeign(ctx context.Context, unit string) (bool, error) {
	waited := false
	for {
		qctx, cancel := queryContext(ctx)
		j, ok, err := p.c.UnitJob(qctx, unit)
		var w units.Worker
		if err == nil && ok {
			w, err = p.c.Worker(qctx, unit)
		}
		cancel()
		if err != nil || !ok || (j.Type == "start" && w.Restarts > 0) {
			return waited, err
		}
		state := "running"
		if j.State == "waiting" {
			state = "queued"
		}
		fmt.Fprintf(p.out, "  a systemctl job (%s) is %s: waiting for it\n", j, state)
		if err := p.awaitJob(ctx, j); err != nil {
			return waited, err
		}
		waited = true
	}
}

// awaitJob waits for j within ctx, and not after an interruption.
func (p *poolJobs) awaitJob(ctx context.Context, j units.Job) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if p.interrupted != nil {
		stop := context.AfterFunc(p.interrupted, func() { cancel(context.Cause(p.interrupted)) })
		defer stop()
	}
	err := p.c.AwaitJob(ctx, j)
	if cause := p.stopped(); cause != nil {
		return fmt.Errorf("%w while waiting for a systemctl job (%s); not acted on", cause, j)
	}
	if err != nil {
		return fmt.Errorf("%w (is it stuck? systemctl list-jobs)", err)
	}
	return nil
}

// stopped returns the interruption's cause, nil when there was none.
func (p *poolJobs) stopped() error {
	if p.interrupted == nil || p.interrupted.Err() == nil {
		return nil
	}
	return context.Cause(p.interrupted)
}

func gerund(op string) string {
	switch op {
	case "stop":
		return "stopping it"
	case "start":
		return "starting it"
	}
	return op + "ing it"
}

// syncWriter serializes writes: a rolling restart of several workers at
// once reports from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
