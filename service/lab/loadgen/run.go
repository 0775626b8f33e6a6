package loadgen

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Run loads opts.URL until opts.Requests have been sent, opts.Duration (or
// MaxDuration) has passed, or ctx is cancelled, then waits for the requests
// in flight, each bounded by opts.Timeout.
//
// It returns (nil, err) when opts are invalid (an *OptionError; errors.Is
// ErrNotLoopback for a target off the machine). Otherwise it returns
// (result, nil), even when every request failed or ctx was cancelled: the
// failures are in the Result's counts, and Interrupted tells a cancelled run.
func Run(ctx context.Context, opts Options) (*Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cpu := processCPU()
	r := newRunner(opts, time.Now())
	all := make([]*stats, opts.Concurrency)
	var wg sync.WaitGroup
	for i := range all {
		all[i] = newStats()
		wg.Go(func() { r.work(ctx, all[i]) })
	}
	wg.Wait()
	res := r.result(ctx, all)
	if cpu > 0 {
		res.CPU = processCPU() - cpu
	}
	return res, nil
}

// processCPU is the process's CPU time so far, user and system, or 0 when
// the kernel does not say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runner holds what the goroutines of one run share.
type runner struct {
	opts     Options
	start    time.Time
	deadline time.Time
	interval float64      // ns between intended sends; 0 in a closed loop
	claimed  atomic.Int64 // request numbers handed out so far
	dials    atomic.Int64
}

func newRunner(opts Options, start time.Time) *runner {
	duration := opts.Duration
	if duration == 0 {
		duration = MaxDuration
	}
	r := &runner{opts: opts, start: start, deadline: start.Add(duration)}
	if opts.Rate > 0 {
		r.interval = float64(time.Second) / opts.Rate
	}
	return r
}

// work sends requests until next says stop.
func (r *runner) work(ctx context.Context, s *stats) {
	client := newClient(r.opts, &r.dials)
	defer client.close()
	for {
		sentAt, ok := r.next(ctx)
		if !ok {
			return
		}
		r.do(ctx, client, sentAt, s)
	}
}

// next claims the next request and returns the time its latency counts
// from: now in a closed loop; in an open loop its intended send time, which
// next sleeps until. ok is false when the run is over.
func (r *runner) next(ctx context.Context) (sentAt time.Time, ok bool) {
	if ctx.Err() != nil {
		return time.Time{}, false
	}
	n := r.claimed.Add(1) - 1
	if r.opts.Requests > 0 && n >= int64(r.opts.Requests) {
		return time.Time{}, false
	}
	now := time.Now()
	if !now.Before(r.deadline) {
		return time.Time{}, false
	}
	if r.interval == 0 {
		return now, true
	}
	due := r.start.Add(time.Duration(float64(n) * r.interval))
	if !due.Before(r.deadline) {
		return time.Time{}, false
	}
	return due, sleepUntil(ctx, due)
}

// sleepUntil waits until t; false if ctx was cancelled first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		return true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// do sends one request, reads its body to the end and records the outcome.
func (r *runner) do(ctx context.Context, c *client, sentAt time.Time, s *stats) {
	s.requests++
	late := time.Since(sentAt)
	resp, err := c.do(ctx)
	latency := time.Since(sentAt)
	status := 0
	if err != nil {
		s.recordError(err, ctx.Err() != nil)
	} else {
		status = resp.StatusCode
		s.recordResponse(resp, c.named, latency)
	}
	if r.opts.Trace {
		s.trace = append(s.trace, Record{Due: sentAt, Late: late, Latency: latency, Status: status})
	}
}

func (r *runner) result(ctx context.Context, all []*stats) *Result {
	res := &Result{
		URL:         r.opts.URL,
		Concurrency: r.opts.Concurrency,
		KeepAlive:   r.opts.KeepAlive,
		Rate:        r.opts.Rate,
		Header:      r.opts.Header,
		Dials:       int(r.dials.Load()),
		Interrupted: ctx.Err() != nil,
		Elapsed:     time.Since(r.start),
	}
	res.merge(all)
	if seconds := res.Elapsed.Seconds(); seconds > 0 {
		res.Throughput = float64(res.Responses) / seconds
	}
	return res
}
