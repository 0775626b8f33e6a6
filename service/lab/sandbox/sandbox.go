// Package sandbox drives scripts/sandbox from Go: each box is a real
// systemd booted as PID 1 of private namespaces (its own network namespace,
// so every box serves its own 127.0.0.1:8080) on an overlay root, with the
// built binaries and, optionally, the shipped units installed. Callers drive
// it with systemctl, journalctl and the project's load generator run inside
// the box; nothing reaches the host's units, files or network.
//
// Driver is the one piece of code that spawns the script, writes the env
// file, starts and lists the units and runs the generator: every method
// takes a context and returns an error, for commands such as
// clusterapp-bench. Box is a thin layer on a Driver for tests, failing the
// test instead of returning errors; call Main from TestMain: it builds the
// binaries once into a temporary tree laid out like the repository and
// decides whether boxes can run here (root and an installed systemd); New
// skips the test with that reason otherwise.
//
// The package does not import testing (Box takes the T interface), so a
// command linking the Driver does not link the testing package.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
)

// CommandTimeout bounds every sandbox command not given a timeout of its
// own, so a wedged box fails its caller instead of hanging it.
const CommandTimeout = 2 * time.Minute

// Addresses inside a box, which has a network namespace of its own.
const (
	// URL is where the suite serves (the shipped clusterapp.socket).
	URL = "http://127.0.0.1:8080"
	// MetricsURL is where the pool's metrics are scraped (the shipped
	// clusterapp-metrics.socket).
	MetricsURL = "http://127.0.0.1:9180/metrics"
	// LoadPath is where Up installs the load generator.
	LoadPath = "/usr/local/bin/clusterapp-load"
)

// ErrNotReady is wrapped by the methods that wait for the pool when its
// workers did not all come up (or have no main process).
var ErrNotReady = errors.New("sandbox: workers not ready")

// Driver drives one box through scripts/sandbox.
type Driver struct {
	// Script is the path of scripts/sandbox.
	Script string
	// Name is the box's name.
	Name string
	// Src is the tree whose bin/ and systemd/ are installed
	// (CLUSTERAPP_SANDBOX_SRC); its bin/clusterapp-load is the generator.
	Src string
	// Command runs one scripts/sandbox command and returns its combined
	// output; nil means exec'ing Script. It is the seam for tests.
	Command func(ctx context.Context, args ...string) ([]byte, error)
}

// CommandError is a scripts/sandbox command that failed.
type CommandError struct {
	Args   []string // the script's arguments, e.g. exec NAME -- systemctl ...
	Err    error    // e.g. an *exec.ExitError
	Output string   // combined stdout and stderr
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("sandbox %s: %v", strings.Join(e.Args, " "), e.Err)
	if out := strings.TrimSpace(e.Output); out != "" {
		msg += "\n" + out
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }

// run runs one scripts/sandbox command bounded by timeout. The output is
// returned on failure too: a failed command's output is often the answer
// (systemctl is-active, journalctl).
func (d *Driver) run(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	command := d.Command
	if command == nil {
		command = d.exec
	}
	out, err := command(ctx, args...)
	if err != nil {
		return string(out), &CommandError{Args: args, Err: err, Output: string(out)}
	}
	return string(out), nil
}

func (d *Driver) exec(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, d.Script, args...)
	cmd.Env = append(os.Environ(), "CLUSTERAPP_SANDBOX_SRC="+d.Src)
	return cmd.CombinedOutput()
}

// Options say how Up prepares a box.
type Options struct {
	// Env, when not empty, is written to config.EnvFile before the suite
	// is installed. Default: no file, the units' defaults.
	Env string
	// Bare boots a box without installing the binary and units (for
	// package installation tests). Default false: the suite is installed.
	Bare bool
}

// Up boots the box, writes opts.Env, installs the suite unless opts.Bare
// and copies the generator in (at LoadPath). On error the box may be half
// up: call Down.
func (d *Driver) Up(ctx context.Context, opts Options) error {
	if _, err := d.run(ctx, CommandTimeout, "up", d.Name); err != nil {
		return err
	}
	if opts.Env != "" {
		if err := d.WriteEnv(ctx, opts.Env); err != nil {
			return err
		}
	}
	if !opts.Bare {
		if err := d.Install(ctx); err != nil {
			return err
		}
	}
	return d.Copy(ctx, filepath.Join(d.Src, "bin", "clusterapp-load"), LoadPath)
}

// Install installs Src's binaries and units in the box (scripts/sandbox
// install): a pool running the executables it replaces must be stopped
// first.
func (d *Driver) Install(ctx context.Context) error {
	_, err := d.run(ctx, CommandTimeout, "install", d.Name)
	return err
}

// Down powers the box off; nil when it was not up.
func (d *Driver) Down(ctx context.Context) error {
	_, err := d.run(ctx, CommandTimeout, "down", d.Name)
	return err
}

// Exec runs a command inside the box, bounded by timeout, and returns its
// combined output, also on failure (the error is then a *CommandError).
func (d *Driver) Exec(ctx context.Context, timeout time.Duration, argv ...string) (string, error) {
	return d.run(ctx, timeout, append([]string{"exec", d.Name, "--"}, argv...)...)
}

// Copy copies the host file hostPath into the box at boxPath.
func (d *Driver) Copy(ctx context.Context, hostPath, boxPath string) error {
	_, err := d.run(ctx, CommandTimeout, "cp", d.Name, hostPath, boxPath)
	return err
}

// WriteFile writes content to boxPath inside the box (mode 0644).
func (d *Driver) WriteFile(ctx context.Context, boxPath, content string) error {
	f, err := os.CreateTemp("", "clusterapp-sandbox-")
	if err != nil {
		return fmt.Errorf("write %s: %w", boxPath, err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close() // the write error is the one to report
		return fmt.Errorf("write %s: %w", boxPath, err)
	}
	if err := f.Chmod(0o644); err != nil { // scripts/sandbox cp keeps the mode; CreateTemp's is 0600
		_ = f.Close()
		return fmt.Errorf("write %s: %w", boxPath, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", boxPath, err)
	}
	return d.Copy(ctx, f.Name(), boxPath)
}

// WriteEnv makes content the box's config.EnvFile, the operator's settings.
// The units read it when they start; run `systemctl daemon-reload` (or
// Restart) for the generator to see a new CLUSTERAPP_WORKERS.
func (d *Driver) WriteEnv(ctx context.Context, content string) error {
	return d.WriteFile(ctx, config.EnvFile, content)
}

// Show returns one property of a unit (`systemctl show -p PROP --value`),
// without surrounding white space.
func (d *Driver) Show(ctx context.Context, unit, prop string) (string, error) {
	out, err := d.Exec(ctx, CommandTimeout, "systemctl", "show", "-p", prop, "--value", unit)
	return strings.TrimSpace(out), err
}

// MainPID returns a unit's main process as the box sees it: (0, nil) when
// it has none (stopped, or between restarts).
func (d *Driver) MainPID(ctx context.Context, unit string) (int, error) {
	return d.intProperty(ctx, unit, "MainPID")
}

// NRestarts returns how many times systemd restarted a unit.
func (d *Driver) NRestarts(ctx context.Context, unit string) (int, error) {
	return d.intProperty(ctx, unit, "NRestarts")
}

func (d *Driver) intProperty(ctx context.Context, unit, prop string) (int, error) {
	out, err := d.Show(ctx, unit, prop)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(out)
	if err != nil {
		return 0, fmt.Errorf("%s of %s: %q is not a number", prop, unit, out)
	}
	return n, nil
}
