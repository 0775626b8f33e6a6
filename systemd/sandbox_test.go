package systemd_test

// The harness for the integration tests: each test boots its own real
// systemd with scripts/sandbox (own network namespace, so every box serves
// its own 127.0.0.1:8080), installs the binary and the shipped units, and
// drives it with systemctl, journalctl and the project's load generator run
// inside the box. Nothing here touches the host's units or network.

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
	// scripts/sandbox installs from; skipReason is set when the suite
	// cannot run here.
	srcRoot    string
	skipReason string
	repoRoot   string
	boxSeq     atomic.Int32
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		wd, _ := os.Getwd()
		repoRoot = filepath.Dir(wd)
		if os.Geteuid() != 0 {
			skipReason = "needs root to boot systemd in private namespaces (run as root, as CI does)"
		} else if _, err := os.Stat("/lib/systemd/systemd"); err != nil {
			skipReason = "needs systemd installed (/lib/systemd/systemd)"
		} else if testing.Short() {
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
	}()
	os.Exit(code)
}

// box is one booted sandbox.
type box struct {
	t    *testing.T
	name string
}

// newBox boots a sandbox, installs the suite and writes env (if not empty)
// as /etc/clusterapp/clusterapp.env. The box is powered off at cleanup.
func newBox(t *testing.T, env string) *box {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	b := &box{t: t, name: fmt.Sprintf("it%d-%d", os.Getpid()%10000, boxSeq.Add(1))}
	if out, err := sandbox("up", b.name); err != nil {
		t.Fatalf("sandbox up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := sandbox("exec", b.name, "journalctl", "-b", "--no-pager", "-n", "150", "-u", "clusterapp*")
			t.Logf("journal of the box:\n%s", out)
		}
		if out, err := sandbox("down", b.name); err != nil {
			t.Errorf("sandbox down: %v\n%s", err, out)
		}
	})
	if env != "" {
		b.writeFile("/etc/clusterapp/clusterapp.env", env)
	}
	if out, err := sandbox("install", b.name); err != nil {
		t.Fatalf("sandbox install: %v\n%s", err, out)
	}
	b.copy(filepath.Join(srcRoot, "bin", "clusterapp-load"), "/usr/local/bin/clusterapp-load")
	return b
}

// commandTimeout bounds every sandbox command, so a wedged box fails its
// test instead of hanging the suite.
const commandTimeout = 2 * time.Minute

func sandbox(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "scripts", "sandbox"), args...)
	cmd.Env = append(os.Environ(), "CLUSTERAPP_SANDBOX_SRC="+srcRoot)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// run runs a command inside the box and returns its combined output.
func (b *box) run(args ...string) (string, error) {
	return sandbox(append([]string{"exec", b.name, "--"}, args...)...)
}

// must runs a command inside the box and fails the test if it fails.
func (b *box) must(args ...string) string {
	b.t.Helper()
	out, err := b.run(args...)
	if err != nil {
		b.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

func (b *box) copy(hostPath, boxPath string) {
	b.t.Helper()
	if out, err := sandbox("cp", b.name, hostPath, boxPath); err != nil {
		b.t.Fatalf("sandbox cp: %v\n%s", err, out)
	}
}

func (b *box) writeFile(boxPath, content string) {
	b.t.Helper()
	f := filepath.Join(b.t.TempDir(), filepath.Base(boxPath))
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.copy(f, boxPath)
}

// show returns a unit property.
func (b *box) show(unit, prop string) string {
	b.t.Helper()
	return b.must("systemctl", "show", "-p", prop, "--value", unit)
}

func (b *box) mainPID(unit string) int {
	b.t.Helper()
	pid, _ := strconv.Atoi(b.show(unit, "MainPID"))
	return pid
}

// eventually polls cond every 20ms until it holds or within passes.
func (b *box) eventually(within time.Duration, what string, cond func() bool) time.Duration {
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

func (b *box) workerUnits(n int) []string {
	units := make([]string, n)
	for i := range units {
		units[i] = fmt.Sprintf("clusterapp-worker@%d.service", i+1)
	}
	return units
}

// allActive reports whether every unit is active.
func (b *box) allActive(units ...string) bool {
	_, err := b.run(append([]string{"systemctl", "is-active", "--quiet"}, units...)...)
	return err == nil
}

// activeWorkers lists the worker units that are active.
func (b *box) activeWorkers() []string {
	out := b.must("systemctl", "list-units", "--plain", "--no-legend", "--state=active", "clusterapp-worker@*")
	var units []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			units = append(units, f[0])
		}
	}
	return units
}

// curl sends one request from inside the box.
func (b *box) curl(path string) (string, error) {
	return b.run("curl", "-sS", "--max-time", "30", "-o", "/dev/null", "-w", "%{http_code} %header{x-worker}", "http://127.0.0.1:8080"+path)
}

// load runs the project's load generator inside the box against
// 127.0.0.1:8080 (the box's own loopback) and returns its result.
func (b *box) load(path string, args ...string) *loadgen.Result {
	b.t.Helper()
	argv := append([]string{"/usr/local/bin/clusterapp-load", "-json", "-url", "http://127.0.0.1:8080" + path}, args...)
	out, err := b.run(argv...)
	if err != nil {
		b.t.Fatalf("load: %v\n%s", err, out)
	}
	var res loadgen.Result
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &res); err != nil {
		b.t.Fatalf("load output: %v\n%s", err, out)
	}
	return &res
}

// loadAsync starts load in the background; the returned func waits for it.
func (b *box) loadAsync(path string, args ...string) func() *loadgen.Result {
	done := make(chan *loadgen.Result, 1)
	go func() {
		argv := append([]string{"/usr/local/bin/clusterapp-load", "-json", "-url", "http://127.0.0.1:8080" + path}, args...)
		out, err := b.run(argv...)
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

// start starts the socket and waits for the first request to be served.
func (b *box) start(workers int) {
	b.t.Helper()
	b.must("systemctl", "start", "clusterapp.socket")
	if out, err := b.curl("/"); err != nil || !strings.HasPrefix(out, "200 ") {
		b.t.Fatalf("first request to the cold socket: %q %v", out, err)
	}
	units := b.workerUnits(workers)
	b.eventually(10*time.Second, "all workers active", func() bool { return b.allActive(units...) })
}
