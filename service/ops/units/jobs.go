package units

import (
	"context"
	"fmt"
	"time"
)

// Job is a job systemd holds on a unit, queued or running: one the
// operator commands submitted, or anyone else's (`systemctl restart` by
// hand, a target pulling a worker in, systemd restarting a worker that
// failed). systemd keeps at most one job per unit.
type Job struct {
	ID   uint32
	Unit string
	// Type is systemd's job type: start, stop, restart, verify-active,
	// reload, ... A restart job becomes a start job, with the same ID,
	// once its stop half is done.
	Type string
	// State is "waiting" (queued) or "running".
	State string
}

// String names the job as systemctl would run it: "restart
// clusterapp-worker@2.service".
func (j Job) String() string { return j.Type + " " + j.Unit }

// UnitJob returns the job systemd holds on unit: (Job{}, false, nil) when
// there is none.
func (c *Client) UnitJob(ctx context.Context, unit string) (Job, bool, error) {
	jobs, err := c.conn.ListJobsContext(ctx)
	if err != nil {
		return Job{}, false, fmt.Errorf("list jobs: %w", err)
	}
	for _, j := range jobs {
		if j.Unit == unit {
			return Job{ID: j.Id, Unit: j.Unit, Type: j.JobType, State: j.Status}, true, nil
		}
	}
	return Job{}, false, nil
}

// jobPoll is how often AwaitJob asks whether a job is still there: a job
// someone else submitted sends its JobRemoved to every connection, but
// go-systemd hands it only to the one that submitted it.
const jobPoll = 100 * time.Millisecond

// AwaitJob waits until j is no longer on its unit (finished, whatever its
// result, or replaced), or ctx ends: then the error wraps ctx.Err().
func (c *Client) AwaitJob(ctx context.Context, j Job) error {
	t := time.NewTicker(jobPoll)
	defer t.Stop()
	for {
		cur, ok, err := c.UnitJob(ctx, j.Unit)
		if err != nil {
			return err
		}
		if !ok || cur.ID != j.ID {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting for the job %s: %w", j, ctx.Err())
		case <-t.C:
		}
	}
}
