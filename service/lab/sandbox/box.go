package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/loadgen"
)

// T is what a Box needs of its test; *testing.T has it all.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	FailNow()
	Failed() bool
	Skip(args ...any)
	Cleanup(func())
}

// Box is a booted box for a test: the Driver's operations, failing the
// test where the Driver returns an error.
type Box struct {
	// Driver runs the box's commands; use it directly for an error to
	// inspect rather than a failed test.
	Driver *Driver
	t      T
}

var boxSeq atomic.Int32

// SkipUnlessBoxes skips t as New would when boxes cannot run here (not
// root, no systemd, -short): for a test that checks its own tools before
// it boots one, so that -short skips it rather than failing on a tool.
func SkipUnlessBoxes(t T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// New boots a box and prepares it as Driver.Up does; it skips t when boxes
// cannot run here (see Main). The box is powered off at cleanup; on
// failure its journal is logged first.
func New(t T, opts Options) *Box {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	d := &Driver{
		Script: filepath.Join(repoRoot, "scripts", "sandbox"),
		Name:   fmt.Sprintf("it%d-%d", os.Getpid()%10000, boxSeq.Add(1)),
		Src:    srcRoot,
	}
	// Registered before Up: a half-booted box must go too.
	t.Cleanup(func() {
		ctx := context.Background()
		if t.Failed() {
			out, _ := d.Exec(ctx, CommandTimeout, "journalctl", "-b", "--no-pager", "-n", "150", "-u", "clusterapp*")
			t.Logf("journal of the box:\n%s", out)
		}
		if err := d.Down(ctx); err != nil {
			t.Errorf("%v", err)
		}
	})
	if err := d.Up(context.Background(), opts); err != nil {
		t.Fatalf("%v", err)
	}
	return &Box{Driver: d, t: t}
}

// Run runs a command inside the box, bounded by CommandTimeout, and
// returns its combined output and the command's own error (e.g. an
// *exec.ExitError).
func (b *Box) Run(args ...string) (string, error) {
	out, err := b.Driver.Exec(context.Background(), CommandTimeout, args...)
	return out, commandErr(err)
}

// commandErr returns the error of the command inside a *CommandError,
// whose message repeats the output the caller already has.
func commandErr(err error) error {
	if ce, ok := errors.AsType[*CommandError](err); ok {
		return ce.Err
	}
	return err
}

// Must runs a command inside the box, fails the test if it fails, and
// returns its output without surrounding white space.
func (b *Box) Must(args ...string) string {
	b.t.Helper()
	out, err := b.Driver.Exec(context.Background(), CommandTimeout, args...)
	if err != nil {
		b.t.Fatalf("%v", err)
	}
	return strings.TrimSpace(out)
}

// Copy copies a host file into the box.
func (b *Box) Copy(hostPath, boxPath string) {
	b.t.Helper()
	b.must(b.Driver.Copy(context.Background(), hostPath, boxPath))
}

// WriteFile writes content to boxPath inside the box.
func (b *Box) WriteFile(boxPath, content string) {
	b.t.Helper()
	b.must(b.Driver.WriteFile(context.Background(), boxPath, content))
}

// WriteEnv makes content the box's env file (Driver.WriteEnv).
func (b *Box) WriteEnv(content string) {
	b.t.Helper()
	b.must(b.Driver.WriteEnv(context.Background(), content))
}

func (b *Box) must(err error) {
	b.t.Helper()
	if err != nil {
		b.t.Fatalf("%v", err)
	}
}

// Show returns a unit property.
func (b *Box) Show(unit, prop string) string {
	b.t.Helper()
	v, err := b.Driver.Show(context.Background(), unit, prop)
	b.must(err)
	return v
}

// MainPID returns a unit's main process; 0 when it has none.
func (b *Box) MainPID(unit string) int {
	b.t.Helper()
	pid, err := b.Driver.MainPID(context.Background(), unit)
	b.must(err)
	return pid
}

// MainPIDs returns each unit's main PID (0 for one not running), by unit:
// what a test compares against after a restart.
func (b *Box) MainPIDs(units ...string) map[string]int {
	b.t.Helper()
	pids := make(map[string]int, len(units))
	for _, u := range units {
		pids[u] = b.MainPID(u)
	}
	return pids
}

// Eventually polls cond every 20ms until it holds, failing the test if it
// does not within; it returns how long it took.
func (b *Box) Eventually(within time.Duration, what string, cond func() bool) time.Duration {
	b.t.Helper()
	start := time.Now()
	held, _ := poll(context.Background(), within, 20*time.Millisecond, func() (bool, error) { return cond(), nil })
	if !held {
		b.t.Fatalf("%s: not within %v", what, within)
	}
	return time.Since(start)
}

// WorkerUnits returns the units of workers 1 to n.
func (b *Box) WorkerUnits(n int) []string { return WorkerUnits(n) }

// AllActive reports whether every unit is active.
func (b *Box) AllActive(units ...string) bool {
	return b.Driver.AllActive(context.Background(), units...)
}

// ActiveWorkers lists the worker units that are active.
func (b *Box) ActiveWorkers() []string {
	b.t.Helper()
	units, err := b.Driver.ActiveWorkers(context.Background())
	b.must(err)
	return units
}

// Curl sends one request to path from inside the box and returns "CODE
// WORKER" (see Driver.Curl) and the command's own error.
func (b *Box) Curl(path string) (string, error) {
	out, err := b.Driver.Curl(context.Background(), URL+path, 30*time.Second)
	return out, commandErr(err)
}

// Load runs the project's load generator inside the box against URL+path
// and returns its result.
func (b *Box) Load(path string, args ...string) *loadgen.Result {
	b.t.Helper()
	return b.LoadURL(URL+path, args...)
}

// LoadURL runs the project's load generator inside the box against any
// loopback URL of the box (another port, another 127.0.0.0/8 address, e.g.
// a proxy in front of the suite) and returns its result.
func (b *Box) LoadURL(url string, args ...string) *loadgen.Result {
	b.t.Helper()
	res, err := b.Driver.Load(context.Background(), url, LoadOptions{}, args...)
	b.must(err)
	return res
}

// LoadAsync starts load on URL+path in the background; the returned func
// waits for its result.
func (b *Box) LoadAsync(path string, args ...string) func() *loadgen.Result {
	done := make(chan *loadgen.Result, 1)
	go func() {
		res, err := b.Driver.Load(context.Background(), URL+path, LoadOptions{}, args...)
		if err != nil {
			b.t.Errorf("background %v", err)
		}
		done <- res
	}()
	return func() *loadgen.Result {
		res := <-done
		if res == nil {
			b.t.FailNow()
		}
		return res
	}
}

// Start starts the socket and waits for the first request to be served and
// the workers to be active (Driver.Start).
func (b *Box) Start(workers int) {
	b.t.Helper()
	b.must(b.Driver.Start(context.Background(), workers))
}

var (
	netnsMu sync.Mutex
	netnsOf = map[string]*Netns{} // by box name; closed at the test's cleanup
)

// Netns returns the network namespace of the box's systemd, opened once per
// box and closed when the test ends.
func (b *Box) Netns() *Netns {
	b.t.Helper()
	netnsMu.Lock()
	defer netnsMu.Unlock()
	if n, ok := netnsOf[b.Driver.Name]; ok {
		return n
	}
	n, err := b.Driver.OpenNetns(context.Background())
	b.must(err)
	netnsOf[b.Driver.Name] = n
	b.t.Cleanup(func() {
		netnsMu.Lock()
		delete(netnsOf, b.Driver.Name)
		netnsMu.Unlock()
		_ = n.Close() // read-only; nothing to lose
	})
	return n
}

// Dial connects to addr over TCP from inside the box's network (see Netns).
func (b *Box) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	b.t.Helper()
	return b.Netns().Dial(addr, timeout)
}
