package liveness

import (
	"os"
	"strings"
	"testing"
	"time"
)

// running is a worker under a 10s watchdog that pinged at monotonic 100s.
func running(now time.Duration, state byte) Facts {
	return Facts{
		Running: true, PID: 42, Timeout: 10 * time.Second,
		LastPing: 100 * time.Second, LastPingAt: time.Date(2026, 12, 3, 14, 53, 15, 0, time.Local),
		ProcState: state, Now: now,
	}
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		facts Facts
		state string
		says  []string // in Problem
	}{
		{"pinged just now", running(100*time.Second+200*time.Millisecond, 'S'), OK, nil},
		// A ping every 3.3s: 4.9s is late by less than half an interval.
		{"pinging on time", running(104900*time.Millisecond, 'R'), OK, nil},
		{"hung", running(105100*time.Millisecond, 'S'), Stalled, []string{"no watchdog ping for 5.1s", "since 14:53:15", "expected every 3.3s", "hung?", "kills it in 4.9s"}},
		{"stopped, ping not yet late", running(101200*time.Millisecond, 'T'), Stopped, []string{"stopped by a signal", "SIGSTOP", "last watchdog ping 1.2s ago", "kills it in 8.8s"}},
		{"stopped and late", running(106*time.Second, 'T'), Stopped, []string{"no watchdog ping for 6s", "SIGSTOP", "kills it in 4s"}},
		{"traced", running(101*time.Second, 't'), Stopped, []string{"debugger"}},
		{"past the watchdog", running(111*time.Second, 'D'), Stalled, []string{"no watchdog ping for 11s", "due to kill it"}},
		{"stopped, no watchdog", Facts{Running: true, PID: 42, ProcState: 'T', Now: time.Hour}, Stopped, []string{"SIGSTOP"}},
		{"no watchdog", Facts{Running: true, PID: 42, ProcState: 'S', Now: time.Hour}, OK, nil},
		{"clock unread", Facts{Running: true, PID: 42, Timeout: 10 * time.Second, LastPing: time.Second, ProcState: 'S'}, OK, nil},
		{"not running", Facts{PID: 0, ProcState: 'T', Now: time.Hour}, Unknown, nil},
	} {
		v := Judge(tc.facts)
		if v.State != tc.state {
			t.Errorf("%s: state %q, want %q (%s)", tc.name, v.State, tc.state, v.Problem)
		}
		if len(tc.says) == 0 && v.Problem != "" {
			t.Errorf("%s: problem %q, want none", tc.name, v.Problem)
		}
		for _, s := range tc.says {
			if !strings.Contains(v.Problem, s) {
				t.Errorf("%s: problem %q lacks %q", tc.name, v.Problem, s)
			}
		}
		if v.Healthy() != (tc.state == OK || tc.state == Unknown) {
			t.Errorf("%s: Healthy() = %v for %s", tc.name, v.Healthy(), v.State)
		}
	}
}

func TestParseProcState(t *testing.T) {
	for stat, want := range map[string]byte{
		"342 (clusterapp) S 1 342 342 0 -1 4194560":   'S',
		"342 (a) b) (c) T 1 342 342 0 -1 4194560":     'T', // a command name may hold ") "
		"342 (clusterapp) t 1 342 342 0 -1 4194560\n": 't',
	} {
		if got, err := ParseProcState(stat); err != nil || got != want {
			t.Errorf("ParseProcState(%q) = %c, %v; want %c", stat, got, err, want)
		}
	}
	for _, bad := range []string{"", "342 clusterapp S", "342 (clusterapp)"} {
		if _, err := ParseProcState(bad); err == nil {
			t.Errorf("ParseProcState(%q) accepted", bad)
		}
	}
}

// This test process is running, as /proc says.
func TestProcStateOfSelf(t *testing.T) {
	s, err := ProcState(os.Getpid())
	if err != nil || (s != 'R' && s != 'S') {
		t.Fatalf("own state %q, %v", s, err)
	}
	if _, err := ProcState(0); err == nil {
		t.Error("pid 0 read")
	}
}
