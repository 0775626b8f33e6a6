package systemd_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
	"github.com/clusterapp/clusterapp/service/worker/logging"
)

// A worker that leaks memory is recycled before the kernel's OOM kill
// could take the requests it holds: past CLUSTERAPP_MAX_RSS it drains and
// exits 0, systemd starts a fresh process, and a keep-alive load running
// across it loses nothing. Before, nothing watched a worker's memory: it
// grew until MemoryMax= (an OOM kill, a SIGKILL) or the machine's end.
func TestWorkerOverMaxRSSIsRecycledLosslessly(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_MAX_RSS=96M\nCLUSTERAPP_DEBUG_ENDPOINTS=true\n"})
	b.Start(2)
	workers := b.WorkerUnits(2)
	before := b.MainPIDs(workers...)
	// A worker recycles for memory only once it has served 10 s (a limit
	// below its needs would otherwise recycle it in a loop).
	time.Sleep(11 * time.Second)
	// A fixed rate one worker carries with room to spare, as in the restart
	// tests: the recycled worker's share moves to the other while it drains.
	wait := b.LoadAsync("/", "-c", "16", "-rate", "2000", "-d", "12s")
	time.Sleep(time.Second)
	// 128 MiB in four requests on one keep-alive connection, so one worker
	// holds it all: a leak that grows, and each request short enough
	// (faulting 32 MiB in) that the requests queued behind it on the
	// worker's one admission slot wait less than CLUSTERAPP_ADMISSION_WAIT.
	args := []string{"curl", "-sS", "--max-time", "20", "-w", "%{http_code} %header{x-worker}\n"}
	for range 4 {
		args = append(args, "-o", "/dev/null", sandbox.URL+"/debug/leak?mb=32")
	}
	out, err := b.Run(args...)
	code, leaker := field(out, 0), field(out, 1) // the first leak's
	if err != nil || code != "200" || leaker == "" {
		t.Fatalf("/debug/leak?mb=32 four times: %q %v", out, err)
	}
	t.Logf("the leaks, status and worker each: %q", out)
	n, err := strconv.Atoi(leaker)
	if err != nil {
		t.Fatalf("X-Worker %q", leaker)
	}
	unit := config.WorkerUnit(n)
	other := workers[0]
	if other == unit {
		other = workers[1]
	}
	took := b.Eventually(15*time.Second, unit+" recycled for its memory", func() bool {
		pid := b.MainPID(unit)
		return pid != 0 && pid != before[unit] && b.AllActive(unit)
	})
	res := wait()
	t.Logf("%s leaked up to 128 MiB, over CLUSTERAPP_MAX_RSS=96M, and was replaced within %v; the load: %d requests, %d ok, %d errors, by worker %v",
		unit, took.Round(time.Millisecond), res.Requests, res.OK, res.Errors(), res.ByHeader)
	if res.Errors() != 0 || res.OK == 0 || res.OK != res.Requests {
		t.Errorf("across the recycle: %d ok of %d requests (status %v), errors %d: %v", res.OK, res.Requests, res.StatusCodes, res.Errors(), res.ErrorSamples)
	}
	if pid := b.MainPID(other); pid != before[other] {
		t.Errorf("%s, which leaked nothing, was restarted too (pid %d -> %d)", other, before[other], pid)
	}
	// The journal says what happened and what to look at, under its own
	// MESSAGE_ID; systemd saw a clean exit, not a kill.
	j := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "MESSAGE_ID="+logging.MsgRecycledMemory, "WORKER="+leaker)
	if !strings.Contains(j, "CLUSTERAPP_MAX_RSS=96M") || !strings.Contains(j, "recycling this worker") {
		t.Errorf("no recycle line for worker %s in the journal:\n%s", leaker, j)
	}
	scrape, _ := b.Run("curl", "-sS", "--max-time", "2", sandbox.MetricsURL)
	if v := metricValue(scrape, `clusterapp_worker_exits_total{result="success",worker="`+leaker+`"}`); v < 1 {
		t.Errorf("worker %s's clean exits: %v, want 1 (a drain, not a kill)", leaker, v)
	}
	if v := metricValue(scrape, `clusterapp_worker_recycles_total{reason="memory",worker="`+leaker+`"}`); v != 1 {
		t.Errorf("worker %s's recycles for memory: %v, want 1", leaker, v)
	}
}

// field is the ith whitespace-separated word of s, "" past the end.
func field(s string, i int) string {
	if f := strings.Fields(s); i < len(f) {
		return f[i]
	}
	return ""
}
