package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
)

// StartTimeout bounds how long Start waits for the workers after the first
// request was served.
const StartTimeout = 10 * time.Second

// WorkerUnits returns the units of workers 1 to n.
func WorkerUnits(n int) []string {
	units := make([]string, n)
	for i := range units {
		units[i] = config.WorkerUnit(i + 1)
	}
	return units
}

// ActiveWorkers lists the worker units that are active.
func (d *Driver) ActiveWorkers(ctx context.Context) ([]string, error) {
	out, err := d.Exec(ctx, CommandTimeout, "systemctl", "list-units", "--plain", "--no-legend", "--state=active", config.WorkerPattern)
	if err != nil {
		return nil, err
	}
	var units []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			units = append(units, f[0])
		}
	}
	return units, nil
}

// AllActive reports whether every unit is active; false also when the box
// could not be asked.
//
// `systemctl is-active` with several units succeeds when any one of them is
// active (systemctl(1)), so its exit status alone let Start return while a
// worker was still down; each unit's line of its output is read instead.
func (d *Driver) AllActive(ctx context.Context, units ...string) bool {
	out, _ := d.Exec(ctx, CommandTimeout, append([]string{"systemctl", "is-active"}, units...)...) // non-zero unless all are active
	return allActive(out, len(units))
}

// allActive reports whether the output of `systemctl is-active` for n units
// says "active" for each of them: its last n lines, one state per unit in
// order (the box's stderr comes first, in the same output).
func allActive(out string, n int) bool {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if n == 0 || len(lines) < n {
		return false
	}
	for _, l := range lines[len(lines)-n:] {
		if strings.TrimSpace(l) != "active" {
			return false
		}
	}
	return true
}

// Curl sends one GET to url from inside the box, bounded by maxTime, and
// returns "CODE WORKER": the status code and the X-Worker header of the
// response ("" when it has none).
func (d *Driver) Curl(ctx context.Context, url string, maxTime time.Duration) (string, error) {
	return d.Exec(ctx, maxTime+10*time.Second, "curl", "-sS", "--max-time", fmt.Sprint(maxTime.Seconds()),
		"-o", "/dev/null", "-w", "%{http_code} %header{x-worker}", url)
}

// served reports whether Curl's output is a 200.
func served(curl string) bool {
	code, _, _ := strings.Cut(strings.TrimSpace(curl), " ")
	return code == "200"
}

// Start starts the sockets, sends the first request to the cold socket
// (socket activation starts the pool) and waits within StartTimeout until
// the units of workers 1 to workers are active. The error wraps
// ErrNotReady when the workers did not come up.
func (d *Driver) Start(ctx context.Context, workers int) error {
	if _, err := d.Exec(ctx, CommandTimeout, "systemctl", "start", config.SocketUnit, config.MetricsSocketUnit); err != nil {
		return err
	}
	out, err := d.Curl(ctx, URL+"/", 30*time.Second)
	if err != nil {
		return fmt.Errorf("first request to the cold socket: %w", err)
	}
	if !served(out) {
		return fmt.Errorf("first request to the cold socket: got %q, want 200", strings.TrimSpace(out))
	}
	units := WorkerUnits(workers)
	held, err := poll(ctx, StartTimeout, 20*time.Millisecond, func() (bool, error) { return d.AllActive(ctx, units...), nil })
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("%w: %s not all active within %v", ErrNotReady, strings.Join(units, " "), StartTimeout)
	}
	return nil
}

// Restart runs `systemctl daemon-reload` (the generator reads the env file
// again), stops every unit of the suite and starts the sockets and the
// target again: the pool runs on fresh processes. It does not wait for
// them; see WaitReady.
func (d *Driver) Restart(ctx context.Context) error {
	for _, argv := range [][]string{
		{"systemctl", "daemon-reload"},
		{"systemctl", "stop", config.TargetUnit, config.WorkerPattern, config.SocketUnit, config.MetricsSocketUnit},
		{"systemctl", "start", config.SocketUnit, config.MetricsSocketUnit, config.TargetUnit},
	} {
		if _, err := d.Exec(ctx, CommandTimeout, argv...); err != nil {
			return err
		}
	}
	return nil
}

// WaitReady waits within timeout until exactly the units of workers 1 to
// workers are active and a request to URL was answered 200. The error
// wraps ErrNotReady when they were not, naming the active units.
func (d *Driver) WaitReady(ctx context.Context, workers int, timeout time.Duration) error {
	want := WorkerUnits(workers)
	var active []string
	held, err := poll(ctx, timeout, 100*time.Millisecond, func() (bool, error) {
		var err error
		if active, err = d.ActiveWorkers(ctx); err != nil || !sameUnits(active, want) {
			return false, err
		}
		out, err := d.Curl(ctx, URL+"/", 5*time.Second)
		return err == nil && served(out), nil
	})
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("%w: want %d workers active; active: %q", ErrNotReady, workers, strings.Join(active, " "))
	}
	return nil
}

func sameUnits(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := make(map[string]bool, len(got))
	for _, u := range got {
		seen[u] = true
	}
	for _, u := range want {
		if !seen[u] {
			return false
		}
	}
	return true
}

// WaitServing waits within timeout until url, on the box's loopback,
// answers 200.
func (d *Driver) WaitServing(ctx context.Context, url string, timeout time.Duration) error {
	var last string
	held, err := poll(ctx, timeout, 200*time.Millisecond, func() (bool, error) {
		out, err := d.Curl(ctx, url, 5*time.Second)
		last = strings.TrimSpace(out)
		return err == nil && served(out), nil
	})
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("%s never answered 200 (last: %q)", url, last)
	}
	return nil
}

// poll calls cond every interval until it holds (true, nil), it fails
// (false, err), within passes (false, nil) or ctx ends (false, ctx.Err()).
func poll(ctx context.Context, within, interval time.Duration, cond func() (bool, error)) (bool, error) {
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if ok || err != nil {
			return ok, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(interval):
		}
	}
}
