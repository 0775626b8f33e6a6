package systemd_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
	"github.com/clusterapp/clusterapp/service/worker/logging"
)

// The workers log natively to the journal under their hardened units: an
// operator selects a worker with WORKER= and an event with MESSAGE_ID=
// (service/worker/logging), `journalctl -p` still filters by priority, and
// `journalctl -u` reads the lines as before, each from the unit that wrote
// it, even a worker's last line before it exits.
func TestJournalFields(t *testing.T) {
	const env = "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_WATCHDOG_SEC=2s\nCLUSTERAPP_DEBUG_ENDPOINTS=true\nCLUSTERAPP_NO_SUCH_SETTING=1\n"
	b := sandbox.New(t, sandbox.Options{Env: env})
	b.Start(2)
	unit := config.WorkerUnit(2)
	oldPID := b.MainPID(unit)
	b.Must("systemctl", "restart", unit)
	newPID := b.MainPID(unit)
	if newPID == oldPID || newPID == 0 {
		t.Fatalf("worker 2 MainPID %d after a restart, was %d", newPID, oldPID)
	}

	// Worker 2's ready line, before and after the restart, and only its own.
	var ready []journalEntry
	b.Eventually(10*time.Second, "worker 2's ready line after the restart", func() bool {
		ready = journalEntries(b, "WORKER=2", "MESSAGE_ID="+logging.MsgReady)
		return len(ready) >= 2 && ready[len(ready)-1].pid() == newPID
	})
	if ready[len(ready)-2].pid() != oldPID {
		t.Errorf("the ready line before the last is from pid %d, want the worker before the restart, %d", ready[len(ready)-2].pid(), oldPID)
	}
	for _, e := range ready {
		e.want(t, "_SYSTEMD_UNIT", unit)
		e.want(t, "SYSLOG_IDENTIFIER", "clusterapp")
		e.want(t, "PRIORITY", "6")
		// MESSAGE= reads as the stderr line did: the text formatter's,
		// without a "<6>" prefix (that would be a failed native send).
		if m := e["MESSAGE"]; !strings.HasPrefix(m, "level=info msg=serving ") || !strings.Contains(m, " worker=2") || strings.Contains(m, "message_id") {
			t.Errorf("ready MESSAGE=%q", m)
		}
	}
	for _, e := range journalEntries(b, "WORKER=2") {
		e.want(t, "_SYSTEMD_UNIT", unit)
	}

	// The old worker's drain, down to the line it wrote just before it
	// exited, which journald still files under the unit.
	var drained []journalEntry
	b.Eventually(5*time.Second, "the old worker 2's drained line", func() bool {
		drained = journalEntries(b, "-u", unit, "WORKER=2", "MESSAGE_ID="+logging.MsgDrained, "_PID="+strconv.Itoa(oldPID))
		return len(drained) == 1
	})
	draining := journalEntries(b, "WORKER=2", "MESSAGE_ID="+logging.MsgDraining, "_PID="+strconv.Itoa(oldPID))
	if len(draining) != 1 {
		t.Fatalf("%d draining lines from the old worker 2, want 1", len(draining))
	}
	draining[0].want(t, "REASON", "signal terminated")

	// Priorities: the unknown variable is a warning, the ready line is not.
	warnings := journalEntries(b, "-p", "warning", "WORKER=1")
	unknown := 0
	for _, e := range warnings {
		if p, _ := strconv.Atoi(e["PRIORITY"]); p > 4 {
			t.Errorf("journalctl -p warning selected PRIORITY=%d: %q", p, e["MESSAGE"])
		}
		if strings.Contains(e["MESSAGE"], "CLUSTERAPP_NO_SUCH_SETTING") {
			unknown++
			e.want(t, "PRIORITY", "4")
		}
	}
	if unknown == 0 {
		t.Errorf("journalctl -p warning WORKER=1 lacks the unknown variable; selected %d entries", len(warnings))
	}

	// An invalid configuration: the generator says so on daemon-reload,
	// worker 2 refuses it and backs off, each line selectable by its id.
	b.WriteEnv(env + "CLUSTERAPP_FIB_MAX_N=bogus\n")
	b.Must("systemctl", "daemon-reload")
	b.Must("systemctl", "restart", "--no-block", unit)
	var refused, backOff []journalEntry
	b.Eventually(15*time.Second, "worker 2's refusal and back-off by MESSAGE_ID", func() bool {
		refused = journalEntries(b, "WORKER=2", "MESSAGE_ID="+logging.MsgInvalidConfig)
		backOff = journalEntries(b, "WORKER=2", "MESSAGE_ID="+logging.MsgBackOff)
		return len(refused) > 0 && len(backOff) > 0
	})
	refused[0].want(t, "PRIORITY", "3")
	refused[0].want(t, "_SYSTEMD_UNIT", unit)
	if m := refused[0]["MESSAGE"]; !strings.HasPrefix(m, `clusterapp: invalid configuration: CLUSTERAPP_FIB_MAX_N="bogus" is invalid`) {
		t.Errorf("refusal MESSAGE=%q", m)
	}
	backOff[0].want(t, "PRIORITY", "4")
	backOff[0].want(t, "FAILURES", "1")
	generator := journalEntries(b, "SYSLOG_IDENTIFIER=clusterapp-generator", "MESSAGE_ID="+logging.MsgInvalidConfig)
	if len(generator) == 0 || !strings.Contains(generator[len(generator)-1]["MESSAGE"], "CLUSTERAPP_FIB_MAX_N") {
		t.Errorf("the generator's invalid-setting lines by MESSAGE_ID: %v", generator)
	}

	// A wedged worker's failing health probe, by its id alone (worker 1:
	// worker 2 is not serving).
	go func() { _, _ = b.Run("curl", "-s", "--max-time", "20", "http://127.0.0.1:8080/debug/hang") }()
	var probe []journalEntry
	b.Eventually(15*time.Second, "a failed health probe by MESSAGE_ID", func() bool {
		probe = journalEntries(b, "MESSAGE_ID="+logging.MsgWatchdogProbeFailed)
		return len(probe) > 0
	})
	probe[0].want(t, "PRIORITY", "3")
	worker, _ := strconv.Atoi(probe[0]["WORKER"]) // a bad number names no unit, and want fails
	probe[0].want(t, "_SYSTEMD_UNIT", config.WorkerUnit(worker))
}

// journalEntry is one entry of `journalctl -o json`, its text fields only.
type journalEntry map[string]string

func (e journalEntry) pid() int {
	pid, _ := strconv.Atoi(e["_PID"])
	return pid
}

func (e journalEntry) want(t *testing.T, field, value string) {
	t.Helper()
	if e[field] != value {
		t.Errorf("%s=%q, want %q, in the entry %q", field, e[field], value, e["MESSAGE"])
	}
}

// journalEntries returns this boot's entries journalctl selects with args,
// oldest first.
func journalEntries(b *sandbox.Box, args ...string) []journalEntry {
	out := b.Must(append([]string{"journalctl", "-b", "-q", "--no-pager", "-o", "json"}, args...)...)
	var entries []journalEntry
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var raw map[string]any
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			continue // not an entry
		}
		e := journalEntry{}
		for k, v := range raw {
			if s, ok := v.(string); ok {
				e[k] = s
			}
		}
		entries = append(entries, e)
	}
	return entries
}
