package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/ops/units"
)

// fakeReader answers each worker's state in turn, repeating the last one.
type fakeReader struct {
	states map[string][]units.Worker
	queued bool // a job waits on every worker
}

func (f *fakeReader) Worker(_ context.Context, unit string) (units.Worker, error) {
	s := f.states[unit]
	w := s[0]
	if len(s) > 1 {
		f.states[unit] = s[1:]
	}
	return w, nil
}

func (f *fakeReader) UnitJob(_ context.Context, unit string) (units.Job, bool, error) {
	return units.Job{ID: 1, Unit: unit, Type: "start", State: "waiting"}, f.queued, nil
}

func TestAwaitServing(t *testing.T) {
	const w1, w3 = "clusterapp-worker@1.service", "clusterapp-worker@3.service"
	up := units.Worker{ActiveState: "active", SubState: "running", PID: 42}
	starting := func(restarts int) units.Worker {
		return units.Worker{ActiveState: "activating", SubState: "start", Restarts: restarts}
	}
	stopped := units.Worker{ActiveState: "inactive", SubState: "dead", Result: "success"}
	for _, tc := range []struct {
		name   string
		states map[string][]units.Worker
		queued bool
		err    string // "" for nil
		output string
	}{
		{name: "all serving: nothing said", states: map[string][]units.Worker{w1: {up}, w3: {up}}},
		{name: "a starting worker is waited for", states: map[string][]units.Worker{w1: {up}, w3: {starting(0), starting(0), up}},
			output: "waiting up to 1m0s for clusterapp-worker@3.service to serve\n  clusterapp-worker@3.service: pid 42, ready after"},
		{name: "a worker failing again meanwhile is a failure", states: map[string][]units.Worker{w1: {up}, w3: {starting(1), starting(1), starting(2)}},
			err: "clusterapp-worker@3.service is not serving: it failed again while systemd was starting it (restarts 1 -> 2)"},
		{name: "a stopped worker nothing starts is a failure", states: map[string][]units.Worker{w1: {up}, w3: {starting(0), stopped}},
			err: "clusterapp-worker@3.service is not serving: it is inactive/dead (result success) and nothing is starting it"},
		{name: "a stopped worker with a start job queued is waited for", states: map[string][]units.Worker{w1: {up}, w3: {stopped, stopped, up}}, queued: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			err := awaitServing(context.Background(), &fakeReader{states: tc.states, queued: tc.queued}, []string{w1, w3}, time.Minute, time.Millisecond, &out)
			if (tc.err == "") != (err == nil) || (err != nil && err.Error() != tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
			var ns *notServing
			if tc.err != "" && !errors.As(err, &ns) {
				t.Errorf("error %T, want a *notServing for explainFailure", err)
			}
			if !strings.Contains(out.String(), tc.output) || (tc.output == "" && tc.err == "" && !tc.queued && out.Len() > 0) {
				t.Errorf("output:\n%s\nwant it to contain %q", out.String(), tc.output)
			}
		})
	}
}

// A worker still starting at the timeout is named, as reload names one
// whose restart took too long.
func TestAwaitServingTimeout(t *testing.T) {
	const w2 = "clusterapp-worker@2.service"
	f := &fakeReader{states: map[string][]units.Worker{w2: {{ActiveState: "activating", SubState: "start"}}}}
	var out strings.Builder
	err := awaitServing(context.Background(), f, []string{w2}, 20*time.Millisecond, time.Millisecond, &out)
	var ns *notServing
	if !errors.As(err, &ns) || ns.Unit != w2 || !strings.Contains(err.Error(), "not ready within 20ms (--timeout)") {
		t.Errorf("error %v, want worker 2 not ready within the timeout", err)
	}
}
