package main

// Process tests: the built binary, driven from outside the way systemd drives
// it, with a real inherited listening socket (LISTEN_FDS/LISTEN_PID and
// ExtraFiles) and a real NOTIFY_SOCKET (a unixgram socket in t.TempDir()).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/admission"
	"github.com/clusterapp/clusterapp/service/worker/crashloop"
)

// binary is the shipped build; docsBinary the man page generator's
// (-tags mandocs, make build's bin/clusterapp-docs).
var binary, docsBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "clusterapp-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "clusterapp")
	docsBinary = filepath.Join(dir, "clusterapp-docs")
	for _, build := range [][]string{{"-o", binary}, {"-tags", "mandocs", "-o", docsBinary}} {
		out, err := exec.Command("go", append(append([]string{"build"}, build...), ".")...).CombinedOutput()
		if err != nil {
			os.RemoveAll(dir)
			panic("build clusterapp " + strings.Join(build, " ") + ": " + err.Error() + "\n" + string(out))
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// notifySocket collects sd_notify messages sent to a real unixgram socket.
type notifySocket struct {
	path string
	mu   sync.Mutex
	msgs []notifyMsg
	conn *net.UnixConn
}

type notifyMsg struct {
	at   time.Time
	text string
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	n := &notifySocket{path: path, conn: c}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.msgs = append(n.msgs, notifyMsg{time.Now(), string(buf[:k])})
			n.mu.Unlock()
		}
	}()
	return n
}

// count returns how many messages contain s, and the time of the last one.
func (n *notifySocket) count(s string) (int, time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, last := 0, time.Time{}
	for _, m := range n.msgs {
		if strings.Contains(m.text, s) {
			c, last = c+1, m.at
		}
	}
	return c, last
}

// waitFor waits (bounded) until a message containing s arrived.
func (n *notifySocket) waitFor(t *testing.T, s string, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if c, at := n.count(s); c > 0 {
			return at
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %q notification within %v; got %q", s, within, n.all())
	return time.Time{}
}

func (n *notifySocket) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var s []string
	for _, m := range n.msgs {
		s = append(s, m.text)
	}
	return s
}

// sharedSocket is a listening socket the test holds like systemd does.
type sharedSocket struct {
	file *os.File
	addr string
	// metrics is the metrics socket passed alongside (FileDescriptorName=metrics).
	metrics *sharedSocket
}

// newSharedSocket returns the service socket and, passed with it, a
// metrics socket, as clusterapp.socket and clusterapp-metrics.socket.
func newSharedSocket(t *testing.T) sharedSocket {
	t.Helper()
	s := newListeningFile(t)
	m := newListeningFile(t)
	s.metrics = &m
	return s
}

func newListeningFile(t *testing.T) sharedSocket {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // f keeps the socket open
	if err := syscall.SetNonblock(int(f.Fd()), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return sharedSocket{file: f, addr: addr}
}

// proc is a started clusterapp process.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// splitFlags separates serve's flags (entries starting with "--", such as
// --instance=N, as the unit passes %i) from the environment (NAME=value).
func splitFlags(env []string) (flags, vars []string) {
	for _, e := range env {
		if strings.HasPrefix(e, "--") {
			flags = append(flags, e)
		} else {
			vars = append(vars, e)
		}
	}
	return flags, vars
}

// startWorker runs the binary with the shared socket as fd 3 under socket
// activation. LISTEN_PID must be the worker's own PID, which only exists once
// it starts: a shell sets it to $$ and execs the binary, keeping that PID.
func startWorker(t *testing.T, sock *sharedSocket, n *notifySocket, env ...string) *proc {
	t.Helper()
	flags, vars := splitFlags(env)
	cmd := exec.Command("/bin/sh", append([]string{"-c", `LISTEN_PID=$$ exec "$0" serve "$@"`, binary}, flags...)...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "CLUSTERAPP_DEBUG_ENDPOINTS=true"}, vars...)
	switch {
	case sock != nil && sock.metrics != nil:
		cmd.Env = append(cmd.Env, "LISTEN_FDS=2", "LISTEN_FDNAMES=clusterapp.socket:metrics")
		cmd.ExtraFiles = []*os.File{sock.file, sock.metrics.file}
	case sock != nil:
		cmd.Env = append(cmd.Env, "LISTEN_FDS=1")
		cmd.ExtraFiles = []*os.File{sock.file}
	default:
		// Standalone it binds the metrics address too: never the shipped
		// port, which parallel tests would fight over.
		cmd.Env = append(cmd.Env, "CLUSTERAPP_METRICS_LISTEN="+freeAddr(t))
	}
	if n != nil {
		cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+n.path)
	}
	return runProc(t, cmd)
}

// runProc starts cmd, collecting its stderr; the process is killed at
// cleanup if it still runs, and its stderr logged if the test failed.
func runProc(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	w := &proc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.err = cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			_ = cmd.Process.Kill() // only the PID this test started
			<-w.done
		}
		if t.Failed() {
			t.Logf("worker stderr:\n%s", w.stderr)
		}
	})
	return w
}

// wait waits (bounded) for the worker to exit and returns its exit code.
func (w *proc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(within):
		t.Fatalf("worker still running after %v", within)
	}
	return w.cmd.ProcessState.ExitCode()
}

func (w *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestReadyOnlyOnceServing(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	startWorker(t, &sock, n, "--instance=3")
	n.waitFor(t, "READY=1", 10*time.Second)
	// right at READY the worker answers through the inherited socket
	resp, body := get(t, "http://"+sock.addr+"/")
	if resp.StatusCode != 200 || body != "Hello World!\n" || resp.Header.Get("X-Worker") != "3" {
		t.Fatalf("first request after READY: %d %q X-Worker=%q", resp.StatusCode, body, resp.Header.Get("X-Worker"))
	}
	if msgs := n.all(); !strings.Contains(msgs[0], "READY=1") || !strings.Contains(msgs[0], "STATUS=serving") {
		t.Fatalf("first notification %q, want READY=1 with a status line", msgs[0])
	}
	n.waitFor(t, "STATUS=serving: 1 requests served", 5*time.Second)
}

// The worker's name comes from its unit instance (--instance %i); the
// environment file cannot rename it (issue 11: CLUSTERAPP_INSTANCE there
// named every worker alike and turned balancing off).
func TestInstanceComesFromTheUnitNotTheEnvironment(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, "--instance=2", "CLUSTERAPP_INSTANCE=evil")
	n.waitFor(t, "READY=1", 10*time.Second)
	if resp, _ := get(t, "http://"+sock.addr+"/"); resp.Header.Get("X-Worker") != "2" {
		t.Fatalf("X-Worker %q, want the instance, 2", resp.Header.Get("X-Worker"))
	}
	if !strings.Contains(w.stderr.String(), "CLUSTERAPP_INSTANCE is not read: a worker's name is its unit instance") {
		t.Fatalf("no warning about CLUSTERAPP_INSTANCE; stderr:\n%s", w.stderr)
	}
	bad := startWorker(t, nil, nil, "--instance=a b")
	if code := bad.wait(t, 10*time.Second); code != exitUsage || !strings.Contains(bad.stderr.String(), `serve --instance "a b"`) {
		t.Fatalf("an invalid --instance: exit %d, stderr %q", code, bad.stderr)
	}
}

func TestWatchdogPingsStopWhenWedged(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, "WATCHDOG_USEC=600000") // a probe every 200ms
	n.waitFor(t, "READY=1", 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for c, _ := n.count("WATCHDOG=1"); c < 3; c, _ = n.count("WATCHDOG=1") {
		if time.Now().After(deadline) {
			t.Fatalf("only %d watchdog pings from a healthy worker", c)
		}
		time.Sleep(10 * time.Millisecond)
	}
	go http.Get("http://" + sock.addr + "/debug/hang") // never answered
	deadlineLog := time.Now().Add(10 * time.Second)
	for !strings.Contains(w.stderr.String(), "withholding watchdog pings") {
		if time.Now().After(deadlineLog) {
			t.Fatalf("the wedged worker never reported its failing probe")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before, _ := n.count("WATCHDOG=1")
	time.Sleep(time.Second) // five probe intervals
	if after, _ := n.count("WATCHDOG=1"); after != before {
		t.Fatalf("wedged worker kept pinging: %d pings became %d", before, after)
	}
}

func TestBadConfigExits78WithOneLine(t *testing.T) {
	w := startWorker(t, nil, nil, "CLUSTERAPP_SHUTDOWN_TIMEOUT=abc")
	if code := w.wait(t, 10*time.Second); code != exitConfig {
		t.Fatalf("exit %d, want %d", code, exitConfig)
	}
	out := strings.TrimSpace(w.stderr.String())
	if strings.Count(out, "\n") != 0 || !strings.Contains(out, `CLUSTERAPP_SHUTDOWN_TIMEOUT="abc"`) || !strings.Contains(out, "expected a duration") {
		t.Fatalf("stderr %q", out)
	}
}

// Settings systemd applies (through the generator) do not stop a worker
// when they are invalid: it warns and serves, as the generator fell back to
// their defaults. The listen address stops only a standalone worker, which
// must bind it (issue 11).
func TestUnitSettingsDoNotStopTheWorker(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, "CLUSTERAPP_WORKERS=many", "CLUSTERAPP_LIMIT_NOFILE=10", "CLUSTERAPP_LISTEN=localhost:1")
	n.waitFor(t, "READY=1", 10*time.Second)
	for _, want := range []string{`CLUSTERAPP_WORKERS=\"many\" is invalid`, `CLUSTERAPP_LIMIT_NOFILE=\"10\" is invalid`, `CLUSTERAPP_LISTEN=\"localhost:1\" is invalid`, "the worker serves on"} {
		if !strings.Contains(w.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, w.stderr)
		}
	}
	w.signal(t, syscall.SIGTERM)
	w.wait(t, 10*time.Second)

	standalone := startWorker(t, nil, nil, "CLUSTERAPP_LISTEN=localhost:1")
	if code := standalone.wait(t, 10*time.Second); code != exitConfig {
		t.Fatalf("a standalone worker with an invalid listen address: exit %d, want %d", code, exitConfig)
	}
	if !strings.Contains(standalone.stderr.String(), `"localhost" is not an IP address`) {
		t.Fatalf("stderr %q", standalone.stderr)
	}
}

func TestConnectionSocketRefused(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	defer l.Close()
	c, _ := net.Dial("tcp", l.Addr().String())
	defer c.Close()
	f, _ := c.(*net.TCPConn).File()
	w := startWorker(t, &sharedSocket{file: f}, nil)
	if code := w.wait(t, 10*time.Second); code == 0 {
		t.Fatal("worker accepted a connected socket as its listener")
	}
	if !strings.Contains(w.stderr.String(), "Accept=yes") {
		t.Fatalf("stderr %q does not explain the Accept=yes mistake", w.stderr)
	}
}

func TestRecycleExitsZero(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, "CLUSTERAPP_MAX_REQUESTS=5")
	n.waitFor(t, "READY=1", 10*time.Second)
	for range 5 {
		if resp, _ := get(t, "http://"+sock.addr+"/"); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("recycled worker exit %d, want 0", code)
	}
	n.waitFor(t, "STOPPING=1", time.Second)
}

func TestCrashExitsNonZero(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n)
	n.waitFor(t, "READY=1", 10*time.Second)
	go http.Get("http://" + sock.addr + "/debug/crash")
	if code := w.wait(t, 10*time.Second); code == 0 {
		t.Fatal("/debug/crash exited 0")
	}
}

func TestSecondSignalExitsAtOnce(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, "CLUSTERAPP_DRAIN_IDLE_GRACE=1h", "CLUSTERAPP_SHUTDOWN_TIMEOUT=1h")
	n.waitFor(t, "READY=1", 10*time.Second)
	idle, err := net.Dial("tcp", sock.addr) // holds the drain open
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil {
		t.Fatal(err)
	}
	w.signal(t, syscall.SIGTERM)
	n.waitFor(t, "STOPPING=1", 5*time.Second)
	select {
	case <-w.done:
		t.Fatal("worker exited while a connection was open and the drain timeout is 1h")
	case <-time.After(300 * time.Millisecond):
	}
	w.signal(t, syscall.SIGTERM)
	if code := w.wait(t, 5*time.Second); code == 0 {
		t.Fatal("a forced exit reported success")
	}
}

func TestStandaloneBindsListenAddress(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	w := startWorker(t, nil, nil, "CLUSTERAPP_LISTEN="+addr)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := &http.Client{Timeout: time.Second}
		resp, err := c.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if !strings.HasPrefix(resp.Header.Get("X-Worker"), "pid-") {
				t.Fatalf("X-Worker %q, want pid-<PID> without --instance", resp.Header.Get("X-Worker"))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("standalone worker never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.signal(t, syscall.SIGINT)
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGINT", code)
	}
}

// A port alone means every address, as in ListenStream=.
func TestStandaloneBindsPortAlone(t *testing.T) {
	l, _ := net.Listen("tcp", ":0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	w := startWorker(t, nil, nil, fmt.Sprintf("CLUSTERAPP_LISTEN=%d", port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := (&http.Client{Timeout: time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a worker given port %d alone never answered on 127.0.0.1: %v\n%s", port, err, w.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.signal(t, syscall.SIGINT)
	w.wait(t, 10*time.Second)
}

// A worker that balances (shared table in RUNTIME_DIRECTORY) and is stopped
// while idle drains in no time: its exit must still be clean. The heartbeat
// goroutine's last write went to the table after the table was unmapped once
// (SIGSEGV, exit 2, the unit marked failed on every stop), so stop it many
// times.
func TestBalancingWorkerStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		sock, n := newSharedSocket(t), newNotifySocket(t)
		w := startWorker(t, &sock, n, "--instance=1", "RUNTIME_DIRECTORY="+dir)
		n.waitFor(t, "READY=1", 10*time.Second)
		w.signal(t, syscall.SIGTERM)
		if code := w.wait(t, 10*time.Second); code != 0 {
			t.Fatalf("stop %d: exit %d, want 0; stderr:\n%s", i+1, code, w.stderr)
		}
		if !strings.Contains(w.stderr.String(), "balance=true") {
			t.Fatalf("balancing was not on; stderr:\n%s", w.stderr)
		}
	}
}

// A worker runs as many Ps as admission slots, and one more while every
// slot computes, so rejections and /healthz do not wait behind CPU-bound
// requests (what /metrics reports, and the log says why); once the load is
// gone it returns to the base. An operator's GOMAXPROCS is kept, with a
// warning when it is too low.
func TestGOMAXPROCSFollowsComputingSlots(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, "CLUSTERAPP_MAX_IN_FLIGHT=1", "CLUSTERAPP_ADMISSION_WAIT=0")
	n.waitFor(t, "READY=1", 10*time.Second)
	procs := func() string {
		_, metrics := get(t, "http://"+sock.metrics.addr+"/metrics")
		return metricValue(metrics, "go_sched_gomaxprocs_threads")
	}
	if got := procs(); got != "1" {
		t.Fatalf("idle with one slot: go_sched_gomaxprocs_threads = %q, want 1; stderr:\n%s", got, w.stderr)
	}
	// Four clients keep the one slot computing /fib?n=32 (tens of ms each;
	// the others are turned away) for at most 20 s, until the spare P shows.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 5 * time.Second}
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+sock.addr+"/fib?n=32", nil)
				if resp, err := c.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	raised := false
	for ctx.Err() == nil && !raised {
		raised = procs() == "2"
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if !raised {
		t.Fatalf("every slot computing for 20 s: GOMAXPROCS stayed at %s, want 2; stderr:\n%s", procs(), w.stderr)
	}
	if !strings.Contains(w.stderr.String(), "a goroutine waited") {
		t.Errorf("the raise was not logged with its reason; stderr:\n%s", w.stderr)
	}
	// Back to the base once the slot has been calm for the hold (10 s).
	deadline := time.Now().Add(admission.DefaultHold + 10*time.Second)
	for procs() != "1" {
		if time.Now().After(deadline) {
			t.Fatalf("GOMAXPROCS = %s %v after the load, want 1; stderr:\n%s", procs(), admission.DefaultHold+10*time.Second, w.stderr)
		}
		time.Sleep(250 * time.Millisecond)
	}
	w.signal(t, syscall.SIGTERM)
	w.wait(t, 10*time.Second)

	sock, n = newSharedSocket(t), newNotifySocket(t)
	w = startWorker(t, &sock, n, "CLUSTERAPP_MAX_IN_FLIGHT=1", "GOMAXPROCS=1")
	n.waitFor(t, "READY=1", 10*time.Second)
	if procs() != "1" {
		t.Fatalf("the operator's GOMAXPROCS=1 was not kept; stderr:\n%s", w.stderr)
	}
	if !strings.Contains(w.stderr.String(), "GOMAXPROCS=1 is not above the 1 admission slot(s)") {
		t.Fatalf("no warning for GOMAXPROCS=1 with 1 slot; stderr:\n%s", w.stderr)
	}
}

// Under systemd (a RuntimeDirectory), a worker with a bad configuration waits
// longer at each failure in a row before exiting 78, and says so in STATUS=;
// SIGTERM ends the wait; once a worker is ready, the count starts again.
func TestBadConfigRestartsSlowDown(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "config-failures.7")
	bad := []string{"--instance=7", "RUNTIME_DIRECTORY=" + dir, "CLUSTERAPP_FIB_MAX_N=bogus"}
	for i := 1; i <= 3; i++ {
		n := newNotifySocket(t)
		w := startWorker(t, nil, n, bad...)
		if code := w.wait(t, 10*time.Second); code != exitConfig {
			t.Fatalf("failure %d: exit %d, want %d", i, code, exitConfig)
		}
		want := fmt.Sprintf("STATUS=bad configuration, failure %d in a row; exiting in %s", i, crashloop.Delay(i))
		n.waitFor(t, want, time.Second)
		if _, err := os.ReadFile(count); err != nil {
			t.Fatalf("failure %d not counted: %v", i, err)
		}
	}

	// Far into a loop the wait is 30s; a stop must not wait for it.
	if err := os.WriteFile(count, []byte("20\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := newNotifySocket(t)
	w := startWorker(t, nil, n, bad...)
	n.waitFor(t, "exiting in 30s", 10*time.Second)
	// The reason is in the journal while the worker waits, not 30s later
	// (issue 11), and only once.
	const reason = `invalid configuration: CLUSTERAPP_FIB_MAX_N="bogus" is invalid`
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(w.stderr.String(), reason); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the reason is not logged while the worker waits 30s; stderr:\n%s", w.stderr)
		}
	}
	w.signal(t, syscall.SIGTERM)
	if code := w.wait(t, 5*time.Second); code != exitConfig {
		t.Fatalf("stopped during the wait: exit %d, want %d", code, exitConfig)
	}
	if got := strings.Count(w.stderr.String(), reason); got != 1 {
		t.Fatalf("the reason was logged %d times, want once; stderr:\n%s", got, w.stderr)
	}

	sock, n := newSharedSocket(t), newNotifySocket(t)
	w = startWorker(t, &sock, n, "--instance=7", "RUNTIME_DIRECTORY="+dir)
	n.waitFor(t, "READY=1", 10*time.Second)
	w.signal(t, syscall.SIGTERM)
	w.wait(t, 10*time.Second)
	if _, err := os.Stat(count); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a ready worker left its failure count: %v", err)
	}
}

// A balancing worker shows its accept gate in /metrics: whether it is on,
// and how many accepts it put off and for how long.
func TestBalanceGateInMetrics(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, "--instance=1", "RUNTIME_DIRECTORY="+t.TempDir())
	n.waitFor(t, "READY=1", 10*time.Second)
	_, metrics := get(t, "http://"+sock.metrics.addr+"/metrics")
	for name, want := range map[string]string{"clusterapp_balance_gate_open": "1", "clusterapp_balance_accept_deferred_seconds_count": "0"} {
		if got := metricValue(metrics, name, `worker="1"`); got != want {
			t.Errorf("%s{worker=\"1\"} = %q, want %s", name, got, want)
		}
	}
	w.signal(t, syscall.SIGTERM)
	w.wait(t, 10*time.Second)
}

// "OPTIONS *" (the asterisk form) is answered by the worker's stack like
// every request: net/http answers it before any handler unless told not to,
// without X-Worker and uncounted.
func TestOptionsAsteriskNamesTheWorker(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	startWorker(t, &sock, n, "--instance=4")
	n.waitFor(t, "READY=1", 10*time.Second)
	conn, err := net.DialTimeout("tcp", sock.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second)) // a hung worker fails the read, not the test run
	if _, err := io.WriteString(conn, "OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodOptions})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Worker") != "4" {
		t.Fatalf("OPTIONS *: %d, X-Worker %q; headers %v", resp.StatusCode, resp.Header.Get("X-Worker"), resp.Header)
	}
	_, metrics := get(t, "http://"+sock.metrics.addr+"/metrics")
	if got := metricValue(metrics, "clusterapp_http_requests_total", `route="unmatched"`, `code="200"`, `worker="4"`); got != "1" {
		t.Fatalf(`clusterapp_http_requests_total{route="unmatched",code="200"} = %q, want 1`, got)
	}
}

// metricValue returns the value of the first sample of name in a scrape
// whose labels contain every one of labels (`mode="local"`), or "".
func metricValue(scrape, name string, labels ...string) string {
	for _, line := range strings.Split(scrape, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		series, value, _ := strings.Cut(rest, " ")
		if rest[0] == ' ' {
			series, value = "", rest[1:]
		}
		matched := true
		for _, l := range labels {
			matched = matched && strings.Contains(series, l)
		}
		if matched {
			return value
		}
	}
	return ""
}

// freeAddr returns a loopback address with a port nothing listens on now
// (ListenStream= syntax has no port 0 to ask the kernel for one).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A socket-activated worker answers the connection waiting in the backlog
// (on a cold start, the one whose arrival started it) before it reports
// READY=1: worker.run yields once to its serving goroutines, which at one P
// otherwise first ran after READY=1 and the "serving" line. The READY=1
// line's STATUS= counts the request. The scheduler still runs the start-up
// first now and then (it takes from its global queue every 61st turn), so 3
// of 5 starts must count it; without the yield none did.
func TestStartAnswersTheWaitingConnectionBeforeReady(t *testing.T) {
	counted := 0
	for range 5 {
		sock := newSharedSocket(t)
		c, err := net.Dial("tcp", sock.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		n := newNotifySocket(t)
		w := startWorker(t, &sock, n, "GOMAXPROCS=1")
		n.waitFor(t, "READY=1", 10*time.Second)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the waiting connection: %v, %v", resp, err)
		}
		for _, m := range n.all() {
			if strings.Contains(m, "READY=1") && strings.Contains(m, "serving: 1 requests served") {
				counted++
			}
		}
		w.signal(t, syscall.SIGTERM)
		if code := w.wait(t, 10*time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
	t.Logf("READY=1 counted the waiting request in %d of 5 starts", counted)
	if counted < 3 {
		t.Errorf("READY=1 counted the waiting request in %d of 5 starts, want at least 3", counted)
	}
}
