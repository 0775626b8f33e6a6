// Package sandbox drives scripts/sandbox from Go tests: each Box is a real
// systemd booted as PID 1 of private namespaces (its own network namespace,
// so every box serves its own 127.0.0.1:8080) on an overlay root, with the
// freshly built binaries and, optionally, the shipped units installed. Tests
// drive it with systemctl, journalctl and the project's load generator run
// inside the box; nothing reaches the host's units, files or network.
//
// Call Main from TestMain: it builds the binaries once into a temporary tree
// laid out like the repository and decides whether boxes can run here (root
// and an installed systemd); New skips the test with that reason otherwise.
package sandbox

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/loadgen"
)

var (
	// srcRoot is a tree laid out like the repository (bin/, systemd/) that
	// scripts/sandbox installs from; skipReason is set when boxes cannot
	// run here.
	srcRoot    string
	skipReason string
	repoRoot   string
	boxSeq     atomic.Int32
)

// CommandTimeout bounds every sandbox command, so a wedged box fails its
// test instead of hanging the suite.
const CommandTimeout = 2 * time.Minute

// Main prepares the binaries, runs the tests and exits. repo is the
// repository root.
func Main(m *testing.M, repo string) {
	flag.Parse()
	os.Exit(run(m, repo))
}

func run(m *testing.M, repo string) int {
	repoRoot = repo
	switch {
	case os.Geteuid() != 0:
		skipReason = "needs root to boot systemd in private namespaces (run as root, as CI does)"
	case !exists("/lib/systemd/systemd"):
		skipReason = "needs systemd installed (/lib/systemd/systemd)"
	case testing.Short():
		skipReason = "-short"
	}
	if skipReason != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "clusterapp-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srcRoot = dir
	for _, b := range []string{"clusterapp", "clusterapp-load"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", b), "./cmd/"+b)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b, err, out)
			return 1
		}
	}
	if err := os.Symlink(filepath.Join(repoRoot, "systemd"), filepath.Join(dir, "systemd")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// Bin returns the path of a freshly built binary (clusterapp, clusterapp-load).
func Bin(name string) string { return filepath.Join(srcRoot, "bin", name) }

// Options for New.
type Options struct {
	// Env, when not empty, is written to /etc/clusterapp/clusterapp.env.
	Env string
	// Bare boots a box without installing the binary and units (for
	// package installation tests).
	Bare bool
}

// Box is one booted sandbox.
type Box struct {
	t    *testing.T
	Name string
}

// New boots a sandbox and, unless opts.Bare, installs the suite. The box is
// powered off at cleanup; on failure its journal is logged first.
func New(t *testing.T, opts Options) *Box {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	b := &Box{t: t, Name: fmt.Sprintf("it%d-%d", os.Getpid()%10000, boxSeq.Add(1))}
	if out, err := sandbox("up", b.Name); err != nil {
		t.Fatalf("sandbox up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := sandbox("exec", b.Name, "journalctl", "-b", "--no-pager", "-n", "150", "-u", "clusterapp*")
			t.Logf("journal of the box:\n%s", out)
		}
		if out, err := sandbox("down", b.Name); err != nil {
			t.Errorf("sandbox down: %v\n%s", err, out)
		}
	})
	if opts.Env != "" {
		b.WriteFile("/etc/clusterapp/clusterapp.env", opts.Env)
	}
	if !opts.Bare {
		if out, err := sandbox("install", b.Name); err != nil {
			t.Fatalf("sandbox install: %v\n%s", err, out)
		}
	}
	b.Copy(Bin("clusterapp-load"), "/usr/local/bin/clusterapp-load")
	return b
}

func sandbox(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "scripts", "sandbox"), args...)
	cmd.Env = append(os.Environ(), "CLUSTERAPP_SANDBOX_SRC="+srcRoot)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Run runs a command inside the box and returns its combined output.
func (b *Box) Run(args ...string) (string, error) {
	return sandbox(append([]string{"exec", b.Name, "--"}, args...)...)
}

// Must runs a command inside the box and fails the test if it fails.
func (b *Box) Must(args ...string) string {
	b.t.Helper()
	out, err := b.Run(args...)
	if err != nil {
		b.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

func (b *Box) Copy(hostPath, boxPath string) {
	b.t.Helper()
	if out, err := sandbox("cp", b.Name, hostPath, boxPath); err != nil {
		b.t.Fatalf("sandbox cp: %v\n%s", err, out)
	}
}

func (b *Box) WriteFile(boxPath, content string) {
	b.t.Helper()
	f := filepath.Join(b.t.TempDir(), filepath.Base(boxPath))
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.Copy(f, boxPath)
}

// Show returns a unit property.
func (b *Box) Show(unit, prop string) string {
	b.t.Helper()
	return b.Must("systemctl", "show", "-p", prop, "--value", unit)
}

func (b *Box) MainPID(unit string) int {
	b.t.Helper()
	pid, _ := strconv.Atoi(b.Show(unit, "MainPID"))
	return pid
}

// Eventually polls cond every 20ms until it holds or within passes.
func (b *Box) Eventually(within time.Duration, what string, cond func() bool) time.Duration {
	b.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			b.t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func (b *Box) WorkerUnits(n int) []string {
	units := make([]string, n)
	for i := range units {
		units[i] = fmt.Sprintf("clusterapp-worker@%d.service", i+1)
	}
	return units
}

// AllActive reports whether every unit is active.
func (b *Box) AllActive(units ...string) bool {
	_, err := b.Run(append([]string{"systemctl", "is-active", "--quiet"}, units...)...)
	return err == nil
}

// ActiveWorkers lists the worker units that are active.
func (b *Box) ActiveWorkers() []string {
	out := b.Must("systemctl", "list-units", "--plain", "--no-legend", "--state=active", "clusterapp-worker@*")
	var units []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			units = append(units, f[0])
		}
	}
	return units
}

// Curl sends one request from inside the box.
func (b *Box) Curl(path string) (string, error) {
	return b.Run("curl", "-sS", "--max-time", "30", "-o", "/dev/null", "-w", "%{http_code} %header{x-worker}", "http://127.0.0.1:8080"+path)
}

// Load runs the project's load generator inside the box against
// 127.0.0.1:8080 (the box's own loopback) and returns its result.
func (b *Box) Load(path string, args ...string) *loadgen.Result {
	b.t.Helper()
	argv := append([]string{"/usr/local/bin/clusterapp-load", "-json", "-url", "http://127.0.0.1:8080" + path}, args...)
	out, err := b.Run(argv...)
	if err != nil {
		b.t.Fatalf("load: %v\n%s", err, out)
	}
	var res loadgen.Result
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &res); err != nil {
		b.t.Fatalf("load output: %v\n%s", err, out)
	}
	return &res
}

// LoadURL runs the project's load generator inside the box against any
// loopback URL of the box (another port, another 127.0.0.0/8 address, e.g.
// a proxy in front of the suite) and returns its result.
func (b *Box) LoadURL(url string, args ...string) *loadgen.Result {
	b.t.Helper()
	argv := append([]string{"/usr/local/bin/clusterapp-load", "-json", "-url", url}, args...)
	out, err := b.Run(argv...)
	if err != nil {
		b.t.Fatalf("load %s: %v\n%s", url, err, out)
	}
	var res loadgen.Result
	if err := json.Unmarshal([]byte(out[max(strings.Index(out, "{"), 0):]), &res); err != nil {
		b.t.Fatalf("load output: %v\n%s", err, out)
	}
	return &res
}

// LoadAsync starts load in the background; the returned func waits for it.
func (b *Box) LoadAsync(path string, args ...string) func() *loadgen.Result {
	done := make(chan *loadgen.Result, 1)
	go func() {
		argv := append([]string{"/usr/local/bin/clusterapp-load", "-json", "-url", "http://127.0.0.1:8080" + path}, args...)
		out, err := b.Run(argv...)
		var res loadgen.Result
		if err != nil || json.Unmarshal([]byte(out[max(strings.Index(out, "{"), 0):]), &res) != nil {
			b.t.Errorf("background load failed: %v\n%s", err, out)
			done <- nil
			return
		}
		done <- &res
	}()
	return func() *loadgen.Result {
		res := <-done
		if res == nil {
			b.t.FailNow()
		}
		return res
	}
}

// MetricsURL is where the pool's metrics are scraped in a box (the shipped
// clusterapp-metrics.socket).
const MetricsURL = "http://127.0.0.1:9180/metrics"

// Start starts the socket and waits for the first request to be served.
func (b *Box) Start(workers int) {
	b.t.Helper()
	b.Must("systemctl", "start", "clusterapp.socket", "clusterapp-metrics.socket")
	if out, err := b.Curl("/"); err != nil || !strings.HasPrefix(out, "200 ") {
		b.t.Fatalf("first request to the cold socket: %q %v", out, err)
	}
	units := b.WorkerUnits(workers)
	b.Eventually(10*time.Second, "all workers active", func() bool { return b.AllActive(units...) })
}
