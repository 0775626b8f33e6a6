package main

// Process tests of the shared tables in the runtime directory: a worker
// whose directory cannot be used still serves (balancing off, the rate limit
// on the operator's fallback), switches to the shared table once it can be
// opened, and a damaged table file is replaced instead of stopping it.

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tableEnv: a balancing worker with a rate limit of one request per 10s
// and a burst of 3, so a 4th request in a row is refused however slow the
// machine.
func tableEnv(dir string, extra ...string) []string {
	return append([]string{"--instance=1", "RUNTIME_DIRECTORY=" + dir, "CLUSTERAPP_RATE_LIMIT=0.1", "CLUSTERAPP_RATE_BURST=3"}, extra...)
}

// codes sends n requests to path and returns their status codes.
func codes(t *testing.T, addr, path string, n int) []int {
	t.Helper()
	var got []int
	for range n {
		resp, _ := get(t, "http://"+addr+path)
		got = append(got, resp.StatusCode)
	}
	return got
}

// waitLog waits (bounded) until the worker's stderr contains s.
func waitLog(t *testing.T, w *proc, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(w.stderr.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker never logged %q within %v; stderr:\n%s", s, within, w.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stop(t *testing.T, w *proc) {
	t.Helper()
	w.signal(t, syscall.SIGTERM)
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, w.stderr)
	}
}

// A missing runtime directory (removed by hand, a typo in a drop-in): the
// worker serves, balancing off with a warning, the rate limit on a table of
// its own (the default fallback) with a warning; once the directory exists
// again, the worker moves to the shared table by itself. Version 1 exited 1
// before serving ("open .../ratelimit.table: no such file or directory").
func TestMissingRuntimeDirectoryStillServes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "clusterapp")
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, tableEnv(dir)...)
	n.waitFor(t, "READY=1", 10*time.Second)
	if got := codes(t, sock.addr, "/", 4); got[2] != 200 || got[3] != 429 {
		t.Fatalf("status codes %v: want the burst of 3 allowed, then 429 (limited on the local table)", got)
	}
	for _, want := range []string{"balancing off until this worker restarts", "this worker limits on a table of its own"} {
		if !strings.Contains(w.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, w.stderr)
		}
	}
	if _, metrics := get(t, "http://"+sock.metrics.addr+"/metrics"); metricValue(metrics, "clusterapp_ratelimit_table", `mode="local"`) != "1" {
		t.Errorf("/metrics does not say the rate limit is on a local table")
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	waitLog(t, w, "shared rate-limit table opened", 30*time.Second) // retried every 5s
	if _, err := os.Stat(filepath.Join(dir, "ratelimit.v2.65536.table")); err != nil {
		t.Fatalf("the shared table: %v", err)
	}
	if _, metrics := get(t, "http://"+sock.metrics.addr+"/metrics"); metricValue(metrics, "clusterapp_ratelimit_table", `mode="shared"`) != "1" {
		t.Errorf("/metrics does not say the rate limit is on the shared table")
	}
	if strings.Contains(w.stderr.String(), "still unavailable") {
		t.Errorf("the same failure was logged again at a retry:\n%s", w.stderr)
	}
	stop(t, w)
}

// CLUSTERAPP_RATE_LIMIT_FALLBACK=closed: without the shared table the
// rate-limited routes answer 503 with Retry-After and a body saying why;
// health and readiness are served, and the metrics listener says why.
func TestRateLimitFallbackClosed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "clusterapp")
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, tableEnv(dir, "CLUSTERAPP_RATE_LIMIT_FALLBACK=closed")...)
	n.waitFor(t, "READY=1", 10*time.Second)
	resp, body := get(t, "http://"+sock.addr+"/")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "shared rate-limit table is unavailable") {
		t.Fatalf("a rate-limited route: %d Retry-After=%q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if resp, _ := get(t, "http://"+sock.addr+path); resp.StatusCode != 200 {
			t.Errorf("%s: %d, want 200", path, resp.StatusCode)
		}
	}
	_, metrics := get(t, "http://"+sock.metrics.addr+"/metrics")
	if metricValue(metrics, "clusterapp_ratelimit_table", `mode="closed"`) != "1" || metricValue(metrics, "clusterapp_ratelimit_unavailable_total") != "1" {
		t.Errorf("metrics do not say the rate limit is closed and refused 1 request:\n%s", metrics)
	}
	if !strings.Contains(w.stderr.String(), "rate-limited routes answer 503 until it opens") {
		t.Errorf("stderr does not say the limited routes are refused:\n%s", w.stderr)
	}
	stop(t, w)
}

// A read-only runtime directory (ReadOnlyPaths=, a read-only /run): the
// worker serves without balancing and with the local fallback. As root the
// directory is a read-only bind mount in the worker's own mount namespace
// (root ignores permission bits); otherwise it is mode 0555.
func TestReadOnlyRuntimeDirectoryStillServes(t *testing.T) {
	dir := t.TempDir()
	sock, n := newSharedSocket(t), newNotifySocket(t)
	var w *proc
	if os.Geteuid() == 0 {
		w = startReadOnly(t, &sock, n, dir, tableEnv(dir)...)
	} else {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o700)
		w = startWorker(t, &sock, n, tableEnv(dir)...)
	}
	n.waitFor(t, "READY=1", 10*time.Second)
	if got := codes(t, sock.addr, "/", 4); got[2] != 200 || got[3] != 429 {
		t.Fatalf("status codes %v: want the burst of 3 allowed, then 429", got)
	}
	for _, want := range []string{"balancing off until this worker restarts", "this worker limits on a table of its own"} {
		if !strings.Contains(w.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, w.stderr)
		}
	}
	if !strings.Contains(w.stderr.String(), "read-only file system") && !strings.Contains(w.stderr.String(), "permission denied") {
		t.Errorf("stderr does not name the cause:\n%s", w.stderr)
	}
	stop(t, w)
}

// startReadOnly runs the worker like startWorker, in a mount namespace of
// its own (unshare -m, private propagation) where dir is bind-mounted
// read-only. unshare and sh exec in place, so LISTEN_PID=$$ is the worker.
func startReadOnly(t *testing.T, sock *sharedSocket, n *notifySocket, dir string, env ...string) *proc {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux) to mount the directory read-only as root")
	}
	flags, vars := splitFlags(env)
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "/bin/sh", "-c",
		`d=$1; shift; mount --bind -o ro "$d" "$d" && LISTEN_PID=$$ exec "$0" serve "$@"`, binary, dir}, flags...)...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "LISTEN_FDS=1", "NOTIFY_SOCKET=" + n.path}, vars...)
	cmd.ExtraFiles = []*os.File{sock.file}
	return runProc(t, cmd)
}

// Table files truncated (a full disk, a careless cp, an old tool) while no
// worker ran: the next worker replaces them and serves. Version 1 exited 1
// ("has N bytes, want M ... remove it") at every start.
func TestTruncatedTablesAreReplaced(t *testing.T) {
	dir := t.TempDir()
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, tableEnv(dir)...)
	n.waitFor(t, "READY=1", 10*time.Second)
	stop(t, w)
	tables, _ := filepath.Glob(filepath.Join(dir, "*.table"))
	if len(tables) != 3 {
		t.Fatalf("tables after one worker: %v, want the rate-limit, balance and metrics tables", tables)
	}
	for _, f := range tables {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(f, st.Size()/2); err != nil {
			t.Fatal(err)
		}
	}
	sock, n = newSharedSocket(t), newNotifySocket(t)
	w = startWorker(t, &sock, n, tableEnv(dir)...)
	n.waitFor(t, "READY=1", 10*time.Second)
	if resp, _ := get(t, "http://"+sock.addr+"/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	waitLog(t, w, "msg=serving", 10*time.Second) // logged after READY=1: in one CI run, after the GET too
	if c := strings.Count(w.stderr.String(), "table file was unusable: replaced it"); c != 3 {
		t.Errorf("%d replacements logged, want 3:\n%s", c, w.stderr)
	}
	if !strings.Contains(w.stderr.String(), "balance=true") {
		t.Errorf("balancing off after the replacement:\n%s", w.stderr)
	}
	stop(t, w)
}
