package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/ops/units"
)

const unit2 = "clusterapp-worker@2.service"

// fakeUnits is one worker's systemd as poolJobs sees it: the job someone
// else holds on it, its state, and what each job of ours ends with.
type fakeUnits struct {
	job    *units.Job   // someone else's job on the worker, nil for none
	worker units.Worker // the worker's state
	after  units.Worker // its state once that job is done
	// results are what our jobs end with, in turn; a job canceled by
	// another installs displacedBy as the worker's job.
	results     []error
	displacedBy *units.Job
	calls       []string // our jobs and waits, in order
	// hang makes AwaitJob wait for its context: a job that does not end.
	hang bool
}

func (f *fakeUnits) UnitJob(context.Context, string) (units.Job, bool, error) {
	if f.job == nil {
		return units.Job{}, false, nil
	}
	return *f.job, true, nil
}

func (f *fakeUnits) AwaitJob(ctx context.Context, j units.Job) error {
	f.calls = append(f.calls, "await "+j.String())
	if f.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	f.job, f.worker = nil, f.after
	return nil
}

func (f *fakeUnits) Worker(context.Context, string) (units.Worker, error) { return f.worker, nil }

func (f *fakeUnits) run(op string) error {
	f.calls = append(f.calls, op)
	err := f.results[0]
	f.results = f.results[1:]
	if errors.Is(err, errCanceled) {
		f.job = f.displacedBy
		return &units.JobError{Op: op, Unit: unit2, Result: "canceled"}
	}
	return err
}

var errCanceled = errors.New("canceled")

func (f *fakeUnits) Start(context.Context, string) error   { return f.run("start") }
func (f *fakeUnits) Stop(context.Context, string) error    { return f.run("stop") }
func (f *fakeUnits) Restart(context.Context, string) error { return f.run("restart") }

var (
	workerUp      = units.Worker{Unit: unit2, Number: 2, ActiveState: "active", SubState: "running"}
	workerStopped = units.Worker{Unit: unit2, Number: 2, ActiveState: "inactive", SubState: "dead"}
)

func TestPoolJobs(t *testing.T) {
	stopJob := &units.Job{ID: 7, Unit: unit2, Type: "stop", State: "running"}
	interrupted, interrupt := context.WithCancelCause(context.Background())
	interrupt(errors.New("interrupted by SIGINT"))
	for _, tc := range []struct {
		name        string
		fake        fakeUnits
		interrupted context.Context
		op          func(*poolJobs) error
		err         string // "" for nil; errLeft for errLeft
		calls       string
		output      []string
	}{
		{
			name:  "a systemctl restart running is waited for, then the worker restarted",
			fake:  fakeUnits{job: &units.Job{ID: 5, Unit: unit2, Type: "restart", State: "running"}, worker: workerUp, after: workerUp, results: []error{nil}},
			op:    func(p *poolJobs) error { return p.Restart(context.Background(), unit2) },
			calls: "await restart clusterapp-worker@2.service, restart",
			output: []string{
				"a systemctl job (restart clusterapp-worker@2.service) is running: waiting for it",
				"clusterapp-worker@2.service is active/running after that job: restarting it now",
			},
		},
		{
			name:  "systemd restarting a failed worker (a crash loop) is not waited for",
			fake:  fakeUnits{job: &units.Job{ID: 5, Unit: unit2, Type: "start", State: "running"}, worker: units.Worker{Unit: unit2, ActiveState: "activating", Restarts: 3}, results: []error{nil}},
			op:    func(p *poolJobs) error { return p.Restart(context.Background(), unit2) },
			calls: "restart",
		},
		{
			name:   "a start that finds the worker serving after a systemctl start is left",
			fake:   fakeUnits{job: &units.Job{ID: 5, Unit: unit2, Type: "start", State: "waiting"}, worker: workerStopped, after: workerUp},
			op:     func(p *poolJobs) error { return p.Start(context.Background(), unit2) },
			err:    errLeft.Error(),
			calls:  "await start clusterapp-worker@2.service",
			output: []string{"is queued: waiting for it", "active/running after that job: serving: not started again"},
		},
		{
			name:  "a restart canceled by a systemctl stop is tried once more after it",
			fake:  fakeUnits{worker: workerUp, after: workerStopped, displacedBy: stopJob, results: []error{errCanceled, nil}},
			op:    func(p *poolJobs) error { return p.Restart(context.Background(), unit2) },
			calls: "restart, await stop clusterapp-worker@2.service, restart",
			output: []string{
				"our restart of clusterapp-worker@2.service was canceled by a systemctl job (stop clusterapp-worker@2.service) queued over it: trying once more",
				"a systemctl job (stop clusterapp-worker@2.service) is running: waiting for it",
				"inactive/dead after that job: restarting it now",
			},
		},
		{
			name:  "canceled twice, it gives up saying so",
			fake:  fakeUnits{worker: workerUp, after: workerStopped, displacedBy: stopJob, results: []error{errCanceled, errCanceled}},
			op:    func(p *poolJobs) error { return p.Restart(context.Background(), unit2) },
			err:   "restart clusterapp-worker@2.service: job canceled, a second time (canceled by a systemctl job (stop clusterapp-worker@2.service) queued over it): something keeps acting on clusterapp-worker@2.service",
			calls: "restart, await stop clusterapp-worker@2.service, restart",
		},
		{
			name:        "an interruption ends the wait for another job, and no job of ours starts",
			fake:        fakeUnits{job: stopJob, worker: workerUp, hang: true},
			interrupted: interrupted,
			op:          func(p *poolJobs) error { return p.Restart(context.Background(), unit2) },
			err:         "restart clusterapp-worker@2.service: interrupted by SIGINT while waiting for a systemctl job (stop clusterapp-worker@2.service); not acted on",
			calls:       "await stop clusterapp-worker@2.service",
			output:      []string{"a systemctl job (stop clusterapp-worker@2.service) is running: waiting for it"},
		},
		{
			name:  "a failed job is the worker's own doing: no retry",
			fake:  fakeUnits{worker: workerUp, results: []error{&units.JobError{Op: "restart", Unit: unit2, Result: "failed"}}},
			op:    func(p *poolJobs) error { return p.Restart(context.Background(), unit2) },
			err:   "restart clusterapp-worker@2.service: job failed",
			calls: "restart",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			err := tc.op(&poolJobs{c: &tc.fake, out: &out, interrupted: tc.interrupted})
			switch {
			case tc.err == "" && err != nil, tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want %q", err, tc.err)
			}
			if got := strings.Join(tc.fake.calls, ", "); got != tc.calls {
				t.Errorf("calls %q, want %q", got, tc.calls)
			}
			for _, want := range tc.output {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
			if len(tc.output) == 0 && tc.err == "" && out.Len() > 0 {
				t.Errorf("unexpected output:\n%s", out.String())
			}
		})
	}
}
