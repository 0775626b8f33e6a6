package systemd_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// A frozen worker (SIGSTOP) is active/running to systemd until its
// watchdog fires; status, doctor and the metrics said it was healthy all
// that time. Now each says it is not, seconds before the watchdog acts,
// and healthy again once it runs (SIGCONT).
func TestFrozenWorkerIsReportedUnhealthy(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"}) // WatchdogSec=10s, a ping every 3.3s
	b.Start(2)
	unit := config.WorkerUnit(1)
	assertHealthy(t, b, unit, 0)

	pid := b.MainPID(unit) // the PID systemd names, and no other, is signalled
	b.Must("kill", "-STOP", strconv.Itoa(pid))
	frozen := time.Now()
	cont := func() { _, _ = b.Run("kill", "-CONT", strconv.Itoa(pid)) } // gone already if the watchdog won
	defer cont()

	// /proc says it is stopped at once; its ping is late within 1.5 probe intervals.
	waitOutput(t, b, 3*time.Second, "status names worker 1 stopped", []string{"clusterapp", "status"}, func(out string) bool {
		return regexp.MustCompile(`(?m)^1\s+active/running\s+`+strconv.Itoa(pid)+`\s.*\sSTOPPED$`).MatchString(out) &&
			strings.Contains(out, fmt.Sprintf("worker 1 (pid %d): stopped by a signal", pid))
	})
	// --watch draws the same verdict; timeout ends it (exit status 124).
	watch, _ := b.Run("timeout", "1.5", "clusterapp", "status", "--watch")
	if !regexp.MustCompile(`(?m)^1\s+active/running\s+`+strconv.Itoa(pid)+`\s.*\sSTOPPED$`).MatchString(watch) ||
		!strings.Contains(watch, fmt.Sprintf("worker 1 (pid %d): ", pid)) || !strings.Contains(watch, "SIGSTOP") {
		t.Errorf("status --watch with worker 1 frozen:\n%s", watch)
	}
	waitOutput(t, b, 8*time.Second, "the scrape has worker 1 stalled and not ready", scrapeCmd, func(m string) bool {
		return strings.Contains(m, `clusterapp_worker_ready{worker="1"} 0`) &&
			strings.Contains(m, `clusterapp_worker_stalled{worker="1"} 1`) && strings.Contains(m, `clusterapp_worker_ready{worker="2"} 1`)
	})
	status := b.Must("clusterapp", "status")
	if want := fmt.Sprintf("worker 1 (pid %d): no watchdog ping for ", pid); !strings.Contains(status, want) {
		t.Errorf("status, its ping late, lacks %q:\n%s", want, status)
	}
	var report struct {
		Workers []struct {
			PID    int `json:"pid"`
			Health struct {
				State   string   `json:"state"`
				PingAge *float64 `json:"ping_age_sec"`
				Problem string   `json:"problem"`
			} `json:"health"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(b.Must("clusterapp", "status", "--json")), &report); err != nil || len(report.Workers) != 2 {
		t.Fatalf("status --json: %v %+v", err, report)
	}
	if h := report.Workers[0].Health; h.State != "stopped" || h.PingAge == nil || *h.PingAge < 5 || !strings.Contains(h.Problem, "SIGSTOP") {
		t.Errorf("status --json, worker 1 frozen: %+v", h)
	}
	if h := report.Workers[1].Health; h.State != "ok" {
		t.Errorf("status --json, worker 2: %+v", h)
	}
	out, err := b.Run("clusterapp", "doctor")
	if line := fmt.Sprintf("FAIL  progress      %s (pid %d): no watchdog ping for ", unit, pid); err == nil || !strings.Contains(out, line) || !strings.Contains(out, "kill -CONT "+strconv.Itoa(pid)) {
		t.Errorf("doctor with worker 1 frozen: %v, want exit 1 and %q with its fix:\n%s", err, line, out)
	}
	// All of it before the watchdog fired: the frozen process is still worker 1.
	if now := b.MainPID(unit); now != pid {
		t.Fatalf("worker 1 was replaced (pid %d -> %d) %v after the freeze, before everything said it was frozen", pid, now, time.Since(frozen).Round(time.Millisecond))
	}
	t.Logf("status, the scrape and doctor all reported worker 1 frozen %v after SIGSTOP\n%s\n%s", time.Since(frozen).Round(time.Millisecond), status, out)

	cont()
	assertHealthy(t, b, unit, pid)
}

// A hung worker (every request wedged behind a lock, /debug/hang) runs but
// cannot pass its health probe: reported stalled before the watchdog kills
// it, and healthy again on the process systemd starts next.
func TestHungWorkerIsReportedUnhealthy(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=1\nCLUSTERAPP_DEBUG_ENDPOINTS=true\n"})
	b.Start(1)
	unit := config.WorkerUnit(1)
	pid := b.MainPID(unit)
	go b.Run("curl", "-s", "--max-time", "20", "http://127.0.0.1:8080/debug/hang")
	waitOutput(t, b, 8*time.Second, "status names worker 1 stalled", []string{"clusterapp", "status"}, func(out string) bool {
		return strings.Contains(out, "STALLED") && strings.Contains(out, fmt.Sprintf("worker 1 (pid %d): no watchdog ping for ", pid)) && strings.Contains(out, "hung?")
	})
	// With the only worker hung, the scrape has nobody to answer it: the
	// metrics side is TestFrozenWorkerIsReportedUnhealthy's.
	if out, err := b.Run("clusterapp", "doctor"); err == nil || !strings.Contains(out, "FAIL  progress") || !strings.Contains(out, "systemctl kill -s SIGABRT "+unit) {
		t.Errorf("doctor with worker 1 hung: %v\n%s", err, out)
	}
	if now := b.MainPID(unit); now != pid {
		t.Fatalf("worker 1 was replaced (pid %d -> %d) before status and doctor said it was hung", pid, now)
	}
	b.Eventually(15*time.Second, "the watchdog replaced the hung worker", func() bool {
		now := b.MainPID(unit)
		return now != 0 && now != pid && b.AllActive(unit)
	})
	assertHealthy(t, b, unit, 0)
}

// assertHealthy waits until status, doctor and (for a pool of two) the
// scrape call worker 1 healthy; pid, when not 0, must still be its process.
func assertHealthy(t *testing.T, b *sandbox.Box, unit string, pid int) {
	t.Helper()
	waitOutput(t, b, 5*time.Second, "status calls worker 1 ok", []string{"clusterapp", "status"}, func(out string) bool {
		return regexp.MustCompile(`(?m)^1\s+active/running\s.*\sok$`).MatchString(out) && !strings.Contains(out, "worker 1 (pid")
	})
	waitOutput(t, b, 5*time.Second, "doctor's progress check passes", []string{"clusterapp", "doctor"}, func(out string) bool {
		return strings.Contains(out, "ok    progress      every running worker pings systemd's watchdog on time")
	})
	if len(b.ActiveWorkers()) > 1 {
		waitOutput(t, b, 5*time.Second, "the scrape has worker 1 ready", scrapeCmd, func(m string) bool {
			return strings.Contains(m, `clusterapp_worker_ready{worker="1"} 1`) && strings.Contains(m, `clusterapp_worker_stalled{worker="1"} 0`)
		})
	}
	if pid != 0 {
		if now := b.MainPID(unit); now != pid {
			t.Fatalf("worker 1 is pid %d, not the process that was frozen and continued (%d)", now, pid)
		}
	}
}

// scrapeCmd scrapes the pool's metrics inside the box.
var scrapeCmd = []string{"curl", "-sf", "--max-time", "2", "http://127.0.0.1:9180/metrics"}

// waitOutput runs cmd in the box until cond holds for its output (whatever
// its exit status), and fails the test with the last output if it does not
// within.
func waitOutput(t *testing.T, b *sandbox.Box, within time.Duration, what string, cmd []string, cond func(string) bool) {
	t.Helper()
	var last string
	deadline := time.Now().Add(within)
	for {
		last, _ = b.Run(cmd...)
		if cond(last) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; %v said:\n%.3000s", what, within, cmd, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
