package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/loadgen"
)

// loadPath is where the generator is installed inside the box.
const loadPath = "/usr/local/bin/clusterapp-load"

// loadNice is the generator's nice value. It shares the box's CPUs with the
// workers it loads; at the workers' priority it is starved under CPU-bound
// load, and since open-loop latency runs from the intended send time, its own
// scheduling delay would be reported as the server's.
const loadNice = -10

// target is the suite's address inside the box's own network namespace.
const target = "http://127.0.0.1:8080"

// metricsURL is the pool's metrics listener in the box (clusterapp-metrics.socket).
const metricsURL = "http://127.0.0.1:9180/metrics"

// Errors that end a run: the benchmark reports numbers, but a run that could
// not be made is a failure, not a result.
var (
	// ErrNotReady: a configuration's workers did not all come up.
	ErrNotReady = errors.New("bench: workers not ready")
	// ErrNoResponses: a closed-loop run got no 2xx response at all.
	ErrNoResponses = errors.New("bench: nothing served")
)

// Sandbox drives one box through scripts/sandbox.
type Sandbox struct {
	// Script is the path of scripts/sandbox.
	Script string
	// Name is the box's name.
	Name string
	// Repo is the tree whose bin/ and systemd/ are installed.
	Repo string
	// Command runs one scripts/sandbox command and returns its combined
	// output; nil means exec'ing Script. It is the seam for tests.
	Command func(ctx context.Context, args ...string) ([]byte, error)
}

func (s *Sandbox) sandbox(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	run := s.Command
	if run == nil {
		run = func(ctx context.Context, args ...string) ([]byte, error) {
			cmd := exec.CommandContext(ctx, s.Script, args...)
			cmd.Env = append(os.Environ(), "CLUSTERAPP_SANDBOX_SRC="+s.Repo)
			return cmd.CombinedOutput()
		}
	}
	out, err := run(ctx, args...)
	if err != nil {
		return string(out), fmt.Errorf("sandbox %s: %w\n%s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Up boots the box, installs the suite and copies the generator in.
func (s *Sandbox) Up(ctx context.Context) error {
	if _, err := s.sandbox(ctx, time.Minute, "up", s.Name); err != nil {
		return err
	}
	if _, err := s.sandbox(ctx, time.Minute, "install", s.Name); err != nil {
		return err
	}
	_, err := s.sandbox(ctx, time.Minute, "cp", s.Name, filepath.Join(s.Repo, "bin", "clusterapp-load"), loadPath)
	return err
}

// Down powers the box off.
func (s *Sandbox) Down(ctx context.Context) error {
	_, err := s.sandbox(ctx, time.Minute, "down", s.Name)
	return err
}

// Exec runs a command inside the box, bounded by timeout.
func (s *Sandbox) Exec(ctx context.Context, timeout time.Duration, argv ...string) (string, error) {
	return s.sandbox(ctx, timeout, append([]string{"exec", s.Name, "--"}, argv...)...)
}

// WriteFile writes content to path inside the box.
func (s *Sandbox) WriteFile(ctx context.Context, path, content string) error {
	f, err := os.CreateTemp("", "clusterapp-bench-")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close() // the write error is the one to report
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = s.sandbox(ctx, time.Minute, "cp", s.Name, f.Name(), path)
	return err
}

// Apply makes c the running configuration: env file, daemon-reload, every
// worker stopped, the socket and the target started again; it returns once
// all workers are active and a request was answered 200.
func (s *Sandbox) Apply(ctx context.Context, c Configuration, workers int) error {
	if err := s.WriteFile(ctx, "/etc/clusterapp/clusterapp.env", c.Env); err != nil {
		return err
	}
	if c.WorkerDropIn != "" {
		if err := s.WriteFile(ctx, WorkerDropInPath, c.WorkerDropIn); err != nil {
			return err
		}
	} else if _, err := s.Exec(ctx, time.Minute, "rm", "-f", WorkerDropInPath); err != nil {
		return fmt.Errorf("apply %q: %w", c.Name, err)
	}
	for _, argv := range [][]string{
		{"systemctl", "daemon-reload"},
		{"systemctl", "stop", "clusterapp.target", "clusterapp-worker@*.service", "clusterapp.socket", "clusterapp-metrics.socket"},
		{"systemctl", "start", "clusterapp.socket", "clusterapp-metrics.socket", "clusterapp.target"},
	} {
		if _, err := s.Exec(ctx, time.Minute, argv...); err != nil {
			return fmt.Errorf("apply %q: %w", c.Name, err)
		}
	}
	return s.waitReadyWithin(ctx, c, workers, readyTimeout)
}

// readyTimeout bounds how long a configuration's workers may take to start.
const readyTimeout = 30 * time.Second

func (s *Sandbox) waitReadyWithin(ctx context.Context, c Configuration, workers int, timeout time.Duration) error {
	units := WorkerUnits(workers)
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		active, err := s.Exec(ctx, 10*time.Second, "systemctl", "list-units", "--plain", "--no-legend", "--state=active", "clusterapp-worker@*")
		if err != nil {
			return err
		}
		last = strings.TrimSpace(active)
		if len(strings.Fields(last)) > 0 && len(strings.Split(last, "\n")) == workers && allIn(last, units) {
			code, err := s.Exec(ctx, 10*time.Second, "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", target+"/")
			if err == nil && strings.TrimSpace(code) == "200" {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: configuration %q wants %d workers; active: %q", ErrNotReady, c.Name, workers, last)
}

func allIn(listing string, units []string) bool {
	for _, u := range units {
		if !strings.Contains(listing, u) {
			return false
		}
	}
	return true
}

// WorkerUnits returns clusterapp-worker@1.service .. @n.service.
func WorkerUnits(n int) []string {
	units := make([]string, n)
	for i := range units {
		units[i] = fmt.Sprintf("clusterapp-worker@%d.service", i+1)
	}
	return units
}

// Load runs the generator inside the box against path with the given flags.
func (s *Sandbox) Load(ctx context.Context, path string, budget time.Duration, flags ...string) (*loadgen.Result, error) {
	return s.LoadOn(ctx, "", path, budget, flags...)
}

// LoadOn is Load with the generator bound to the CPUs in cpus (a taskset
// list); "" lets it run anywhere.
func (s *Sandbox) LoadOn(ctx context.Context, cpus, path string, budget time.Duration, flags ...string) (*loadgen.Result, error) {
	return s.LoadURL(ctx, cpus, target+path, budget, flags...)
}

// LoadURL runs the generator inside the box against url (on the box's
// loopback), bound to cpus as LoadOn.
func (s *Sandbox) LoadURL(ctx context.Context, cpus, url string, budget time.Duration, flags ...string) (*loadgen.Result, error) {
	argv := append([]string{"nice", "-n", fmt.Sprint(loadNice), loadPath, "-json", "-url", url}, flags...)
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	out, err := s.Exec(ctx, budget+time.Minute, argv...)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", url, err)
	}
	var res loadgen.Result
	if err := json.Unmarshal([]byte(out[max(strings.Index(out, "{"), 0):]), &res); err != nil {
		return nil, fmt.Errorf("load %s: read result: %w\n%s", url, err, out)
	}
	return &res, nil
}

// Workers reports MainPID, NRestarts and memory of each of n workers.
func (s *Sandbox) Workers(ctx context.Context, n int) ([]Worker, error) {
	var workers []Worker
	for _, unit := range WorkerUnits(n) {
		out, err := s.Exec(ctx, 10*time.Second, "systemctl", "show", "-p", "MainPID", "-p", "NRestarts", unit)
		if err != nil {
			return nil, err
		}
		w := Worker{Unit: unit}
		props := parseProperties(out)
		w.PID, _ = strconv.Atoi(props["MainPID"])
		w.Restarts, _ = strconv.Atoi(props["NRestarts"])
		if w.PID == 0 {
			return nil, fmt.Errorf("%w: %s has no main process", ErrNotReady, unit)
		}
		status, err := s.Exec(ctx, 10*time.Second, "cat", fmt.Sprintf("/proc/%d/status", w.PID))
		if err != nil {
			return nil, err
		}
		w.RSS, w.PeakRSS = parseStatusMemory(status)
		workers = append(workers, w)
	}
	return workers, nil
}

// GOMAXPROCS asks the metrics listener what GOMAXPROCS the workers run
// with: one scrape holds every live worker; it retries a few times while
// fewer than n workers are live.
func (s *Sandbox) GOMAXPROCS(ctx context.Context, n int) (map[string]int, error) {
	var seen map[string]int
	for try := 0; try < 8 && len(seen) < n; try++ {
		out, err := s.Exec(ctx, 10*time.Second, "curl", "-sS", "--max-time", "5", metricsURL)
		if err != nil {
			return nil, err
		}
		seen = parseGOMAXPROCS(out)
		if len(seen) < n {
			time.Sleep(250 * time.Millisecond)
		}
	}
	return seen, nil
}
