package systemd_test

// The shared tables in /run/clusterapp under real systemd: the directory is
// preserved across restarts (RuntimeDirectoryPreserve=yes), so whatever an
// earlier setting or version left there must never stop the pool.

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// tablesEnv turns the rate limit on, high enough never to limit the load
// below (one client, 127.0.0.1, at most 5000 requests a second for 6s).
const tablesEnv = "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_RATE_LIMIT=100000\nCLUSTERAPP_RATE_BURST=100000\n"

// Issue 11, point 4, as reported: adding CLUSTERAPP_RATE_LIMIT_SLOTS=1024
// and restarting made every worker exit 1 ("ratelimit.table has 524304
// bytes, want 8208 ... remove it") until the file was removed by hand. Now a
// rolling restart under load changes the slot count with no failed request
// and no manual step: the new workers use a table of the new size, and the
// old table is removed once its last worker has gone.
func TestRateLimitSlotsChangeUnderLoad(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: tablesEnv})
	b.Start(2)
	units := b.WorkerUnits(2)
	old := b.MainPIDs(units...)
	if ls := b.Must("ls", "-A", "/run/clusterapp"); !strings.Contains(ls, "ratelimit.") {
		t.Fatalf("/run/clusterapp before the change: %s", ls)
	}
	// As in TestOpsReloadUnderKeepAliveLoad: a rate one worker carries
	// while the other restarts.
	wait := b.LoadAsync("/fib?n=15", "-c", "32", "-rate", "5000", "-d", "6s")
	time.Sleep(1500 * time.Millisecond)
	b.WriteEnv(tablesEnv + "CLUSTERAPP_RATE_LIMIT_SLOTS=1024\n")
	b.Must("systemctl", "daemon-reload")
	out := b.Must("clusterapp", "reload")
	res := wait()
	t.Logf("clusterapp reload with RATE_LIMIT_SLOTS 65536 -> 1024:\n%s", out)
	t.Logf("load: %d requests, %d failed, status %v, p99 %v, max %v", res.Requests, res.Errors(), res.StatusCodes, res.Latency.P99, res.Latency.Max)
	if res.Errors() != 0 || res.OK != res.Requests {
		t.Errorf("%d of %d requests failed during the change (status %v): %v", res.Requests-res.OK, res.Requests, res.StatusCodes, res.ErrorSamples)
	}
	assertHealthyRestarts(t, b, units, old)
	ls := b.Must("ls", "-A", "/run/clusterapp")
	if !strings.Contains(ls, "ratelimit.v2.1024.table") || strings.Contains(ls, "ratelimit.v2.65536.table") {
		t.Errorf("/run/clusterapp after the change: %s; want the 1024-slot table and the 65536-slot one removed", ls)
	}
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", config.WorkerPattern)
	if !strings.Contains(journal, "removed a table file no worker uses") {
		t.Errorf("no worker said it removed the old table; journal:\n%s", journal)
	}
}

// Table files truncated while the pool was stopped (a full disk, a careless
// copy): the next workers replace them, say so, and serve. Version 1's files
// left by an upgrade (the directory is preserved) are removed.
func TestTruncatedTablesBeforeStart(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: tablesEnv})
	b.Start(2)
	units := b.WorkerUnits(2)
	b.Must("systemctl", "stop", config.TargetUnit)
	// The stop job returns before the workers have exited; truncating a
	// file a draining worker still maps would fault it (SIGBUS).
	b.Eventually(30*time.Second, "workers stopped", func() bool {
		for _, u := range units {
			if b.Show(u, "ActiveState") != "inactive" {
				return false
			}
		}
		return true
	})
	n := b.Must("sh", "-c", `n=0; for f in /run/clusterapp/*.table; do truncate -s $(( $(stat -c %s "$f") / 2 )) "$f" && n=$((n+1)); done; echo $n`)
	if n != "3" {
		t.Fatalf("truncated %s table files, want 3 (rate limit, balance and metrics)", n)
	}
	b.Must("sh", "-c", `cd /run/clusterapp && head -c 524304 /dev/zero >ratelimit.table.v1 && head -c 16400 /dev/zero >balance.table.v1 &&
		for f in ratelimit balance; do chown --reference=. $f.table.v1 && mv $f.table.v1 $f.table; done`)
	old := map[string]int{}
	b.Start(2)
	if res := b.Load("/", "-c", "8", "-d", "1s"); res.Errors() != 0 || res.OK != res.Requests {
		t.Fatalf("after the restart: %d of %d requests failed (status %v): %v", res.Requests-res.OK, res.Requests, res.StatusCodes, res.ErrorSamples)
	}
	assertHealthyRestarts(t, b, units, old)
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", config.WorkerPattern)
	if c := strings.Count(journal, "table file was unusable: replaced it with a fresh one"); c != 3 {
		t.Errorf("%d replacements in the journal, want 3 (one per table); journal:\n%s", c, journal)
	}
	sizes := b.Must("sh", "-c", `stat -c '%n %s' /run/clusterapp/*.table`)
	// balance: a 64-byte header and 1024 slots of 6 words; rate limit: the
	// header and 65536 cells of one word.
	if !regexp.MustCompile(`^/run/clusterapp/balance\.v4\.1024\.table 49216\n/run/clusterapp/metrics\.v\d+\.1024\.table \d+\n/run/clusterapp/ratelimit\.v2\.65536\.table 524352$`).MatchString(sizes) {
		t.Errorf("tables after the restart:\n%s\nwant the three replaced, at their sizes, and version 1's removed", sizes)
	}
}

// Table files removed while the pool runs (an operator's rm in the runtime
// directory, "to reset the counters"): before, every worker kept the file
// it mapped and every worker started later built new ones, so the pool ran
// split in two (a rate-limit budget in each half) for as long as an old
// worker lived. Now each worker notices within seconds, drains and restarts
// by itself, one after the other, and the pool shares one set of files
// again; no request fails meanwhile.
func TestRemovedTablesAreRejoined(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: tablesEnv})
	b.Start(2)
	units := b.WorkerUnits(2)
	old := b.MainPIDs(units...)
	wait := b.LoadAsync("/", "-c", "4", "-rate", "200", "-d", "16s")
	time.Sleep(500 * time.Millisecond)
	b.Must("sh", "-c", "rm /run/clusterapp/*.table")
	rejoined := b.Eventually(30*time.Second, "every worker restarted on the directory's table files", func() bool {
		for _, u := range units {
			pid := b.MainPID(u)
			if pid == 0 || pid == old[u] {
				return false
			}
			maps, err := b.Run("cat", "/proc/"+strconv.Itoa(pid)+"/maps")
			// DynamicUser=: the files live in /run/private/clusterapp.
			if err != nil || strings.Contains(maps, "(deleted)") || strings.Count(maps, "/clusterapp/") != 3 {
				return false
			}
		}
		return true
	})
	t.Logf("the pool shared one set of tables again %v after the rm", rejoined.Round(time.Millisecond))
	res := wait()
	t.Logf("load: %d requests, %d failed, status %v, p99 %v", res.Requests, res.Errors(), res.StatusCodes, res.Latency.P99)
	if res.Errors() != 0 || res.OK != res.Requests {
		t.Errorf("%d of %d requests failed while the workers rejoined (status %v): %v", res.Requests-res.OK, res.Requests, res.StatusCodes, res.ErrorSamples)
	}
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", config.WorkerPattern)
	if c := strings.Count(journal, "a shared table lost its file name"); c < 2 {
		t.Errorf("%d workers said a table lost its file name, want both; journal:\n%s", c, journal)
	}
	if m := failedExit.FindAllString(journal, 5); len(m) > 0 {
		t.Errorf("a worker exited non-zero: %q", m)
	}
	if n := b.Must("sh", "-c", "ls /run/clusterapp/*.table | wc -l"); n != "3" {
		t.Errorf("%s table files after the rejoin, want 3", n)
	}
}

// A read-only runtime directory (here ReadOnlyPaths=, as a hardening
// drop-in might do by mistake): the workers serve, balancing off and the
// rate limit on each worker's own table, and the journal says so. The
// metrics exporter finds no table: the scrape says no worker of the two
// desired runs (the shipped degraded-pool alert fires), and the journal
// why.
func TestReadOnlyRuntimeDirectory(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_RATE_LIMIT=0.1\nCLUSTERAPP_RATE_BURST=3\n"})
	b.WriteFile("/etc/systemd/system/"+config.WorkerTemplate+".d/90-readonly.conf", "[Service]\nReadOnlyPaths=/run/clusterapp\n")
	b.Must("systemctl", "daemon-reload")
	b.Start(2)
	units := b.WorkerUnits(2)
	// b.Start's request took one token. Each worker limits on its own table
	// of 3: at most 6 of these 20 pass, whichever worker answers.
	res := b.Load("/", "-c", "1", "-n", "20", "-keepalive=false")
	ok, limited := res.StatusCodes[200], res.StatusCodes[429]
	t.Logf("%d allowed, %d limited, by worker %v", ok, limited, res.ByHeader)
	if res.Errors() != 0 || ok+limited != 20 || ok < 2 || ok > 6 {
		t.Errorf("status codes %v, errors %v: want 2..6 allowed and the rest limited", res.StatusCodes, res.ErrorSamples)
	}
	assertHealthyRestarts(t, b, units, map[string]int{})
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", config.WorkerPattern)
	for _, want := range []string{"read-only file system", "balancing off until this worker restarts", "this worker limits on a table of its own",
		"metrics table unavailable: this worker counts alone, and the pool's scrapes"} {
		if !strings.Contains(journal, want) {
			t.Errorf("the journal lacks %q:\n%s", want, journal)
		}
	}
	metrics := b.Must("curl", "-s", sandbox.MetricsURL)
	if !strings.Contains(metrics, "clusterapp_pool_workers 0\n") || !strings.Contains(metrics, "clusterapp_pool_workers_desired 2\n") {
		t.Errorf("/metrics does not say the pool is degraded (0 of 2 workers seen):\n%s", metrics)
	}
}

// failedExit matches systemd's line for a worker that exited non-zero.
var failedExit = regexp.MustCompile(`Main process exited, code=\w+, status=([1-9]|[A-Z])`)

// assertHealthyRestarts checks every worker is active, on a new process
// where old names one, never restarted by systemd after a failure, and that
// no worker process exited non-zero.
func assertHealthyRestarts(t *testing.T, b *sandbox.Box, units []string, old map[string]int) {
	t.Helper()
	for _, u := range units {
		if !b.AllActive(u) {
			t.Errorf("%s not active: %s", u, b.Show(u, "ActiveState"))
		}
		if pid, was := b.MainPID(u), old[u]; was != 0 && (pid == was || pid == 0) {
			t.Errorf("%s not restarted: pid %d -> %d", u, was, pid)
		}
		if n, _ := strconv.Atoi(b.Show(u, "NRestarts")); n != 0 {
			t.Errorf("%s: NRestarts=%d, want 0 (systemd restarted it after a failure)", u, n)
		}
	}
	journal := b.Must("journalctl", "-b", "--no-pager", "-o", "cat", "-u", config.WorkerPattern)
	if m := failedExit.FindAllString(journal, 5); len(m) > 0 || strings.Contains(journal, "Failed with result") {
		t.Errorf("a worker exited non-zero: %q; journal:\n%s", m, journal)
	}
}
