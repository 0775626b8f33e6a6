package units

import (
	"context"
	"fmt"
	"os"

	"github.com/clusterapp/clusterapp/service/config"
	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// JobError is a job that ended with another result than "done".
type JobError struct {
	Op, Unit string
	// Result is systemd's job result: canceled, timeout, failed,
	// dependency or skipped.
	Result string
}

func (e *JobError) Error() string { return fmt.Sprintf("%s %s: job %s", e.Op, e.Unit, e.Result) }

// DialRead connects for reading only (status, doctor): as root to the
// private socket like Dial; otherwise over the D-Bus system bus, where
// systemd lets any user read unit properties (changing units asks polkit,
// so the commands that change them use Dial). ErrNotRoot, naming both ways,
// when there is no system bus to use.
func DialRead(ctx context.Context) (*Client, error) {
	if os.Geteuid() == 0 {
		return Dial(ctx)
	}
	if err := SystemdRunning(); err != nil {
		return nil, err
	}
	conn, err := sddbus.NewSystemConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w, and the D-Bus system bus is not reachable to read as another user (%v)", ErrNotRoot, err)
	}
	return &Client{conn: conn}, nil
}

// Client is a connection to systemd's private socket.
type Client struct {
	conn *sddbus.Conn
}

// Dial checks Preflight and connects to /run/systemd/private.
func Dial(ctx context.Context) (*Client, error) {
	if err := Preflight(); err != nil {
		return nil, err
	}
	conn, err := sddbus.NewSystemdConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoSystemd, err)
	}
	return &Client{conn: conn}, nil
}

// Close closes the connection.
func (c *Client) Close() { c.conn.Close() }

// RequireInstalled returns ErrNotInstalled unless clusterapp.socket is loaded.
func (c *Client) RequireInstalled(ctx context.Context) error {
	s, err := c.Socket(ctx)
	if err != nil {
		return err
	}
	if s.LoadState != "loaded" {
		return ErrNotInstalled
	}
	return nil
}

// Properties returns every property of unit, all interfaces merged.
func (c *Client) Properties(ctx context.Context, unit string) (map[string]any, error) {
	p, err := c.conn.GetAllPropertiesContext(ctx, unit)
	if err != nil {
		return nil, fmt.Errorf("properties of %s: %w", unit, err)
	}
	return p, nil
}

// Workers returns the worker units systemd has loaded (running, or known
// because the target wants them, or failed), sorted by instance.
func (c *Client) Workers(ctx context.Context) ([]Worker, error) {
	list, err := c.conn.ListUnitsByPatternsContext(ctx, nil, []string{config.WorkerPattern})
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	var ws []Worker
	for _, u := range list {
		if _, ok := config.WorkerNumber(u.Name); !ok || u.LoadState != "loaded" {
			continue
		}
		p, err := c.Properties(ctx, u.Name)
		if err != nil {
			return nil, err
		}
		ws = append(ws, workerFromProps(u.Name, p))
	}
	SortWorkers(ws)
	return ws, nil
}

// Worker returns one worker unit.
func (c *Client) Worker(ctx context.Context, unit string) (Worker, error) {
	p, err := c.Properties(ctx, unit)
	if err != nil {
		return Worker{}, err
	}
	return workerFromProps(unit, p), nil
}

// Socket returns clusterapp.socket's state.
func (c *Client) Socket(ctx context.Context) (SocketState, error) {
	p, err := c.Properties(ctx, config.SocketUnit)
	if err != nil {
		return SocketState{}, err
	}
	return socketFromProps(p), nil
}

// Wanted returns the worker units clusterapp.target wants (what the
// generator wrote at the last daemon-reload), sorted by instance.
func (c *Client) Wanted(ctx context.Context) ([]string, error) {
	p, err := c.Properties(ctx, config.TargetUnit)
	if err != nil {
		return nil, err
	}
	all, _ := p["Wants"].([]string)
	var ws []Worker
	for _, u := range all {
		if n, ok := config.WorkerNumber(u); ok {
			ws = append(ws, Worker{Unit: u, Number: n})
		}
	}
	SortWorkers(ws)
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Unit
	}
	return out, nil
}

// TargetActive reports whether clusterapp.target is active (the pool is up).
func (c *Client) TargetActive(ctx context.Context) (bool, error) {
	p, err := c.Properties(ctx, config.TargetUnit)
	if err != nil {
		return false, err
	}
	return str(p["ActiveState"]) == "active", nil
}

// DaemonReload reloads unit files and reruns the generators; it returns
// once systemd has finished.
func (c *Client) DaemonReload(ctx context.Context) error {
	if err := c.conn.ReloadContext(ctx); err != nil {
		return fmt.Errorf("daemon-reload: %w", err)
	}
	return nil
}

// Start starts unit and waits for its job (READY=1 for a Type=notify
// worker). In "fail" mode: a stop job someone else queued on the unit
// (systemctl stop) makes the start fail rather than be canceled by it; a
// start job already there (a target pulling the worker in, systemd
// restarting it) is merged with, not canceled.
func (c *Client) Start(ctx context.Context, unit string) error {
	return c.job(ctx, "start", unit, "fail", c.conn.StartUnitContext)
}

// Stop stops unit and waits for its job (the worker has drained and
// exited). In "replace" mode: a start job on the unit is canceled, which
// is how a worker systemd restarts for good (a crash loop) is stopped.
func (c *Client) Stop(ctx context.Context, unit string) error {
	return c.job(ctx, "stop", unit, "replace", c.conn.StopUnitContext)
}

// Restart restarts unit and waits for its job: the old process has
// drained and the new one has sent READY=1. In "fail" mode, as Start.
func (c *Client) Restart(ctx context.Context, unit string) error {
	return c.job(ctx, "restart", unit, "fail", c.conn.RestartUnitContext)
}

type jobFunc func(ctx context.Context, name, mode string, ch chan<- string) (int, error)

// job enqueues a job in mode and waits for its result or ctx. The channel
// is buffered: go-systemd's dispatcher blocks on it otherwise.
func (c *Client) job(ctx context.Context, op, unit, mode string, enqueue jobFunc) error {
	done := make(chan string, 1)
	if _, err := enqueue(ctx, unit, mode, done); err != nil {
		return fmt.Errorf("%s %s: %w", op, unit, err)
	}
	select {
	case result := <-done:
		if result != "done" {
			return &JobError{Op: op, Unit: unit, Result: result}
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s %s: gave up waiting for the job: %w", op, unit, ctx.Err())
	}
}
