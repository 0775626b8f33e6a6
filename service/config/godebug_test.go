package config

import "testing"

// MonitorAwake reads GODEBUG as the runtime does at start: left to right,
// the last valid schedtrace wins; a value that is not a 32-bit number is
// skipped.
func TestMonitorAwakeReadsGODEBUGLikeTheRuntime(t *testing.T) {
	for _, tc := range []struct {
		godebug string
		awake   bool
	}{
		{MonitorTrace, true},
		{"", false},
		{"http2server=0", false},
		{"http2server=0," + MonitorTrace, true},
		{MonitorTrace + ",madvdontneed=1", true},
		{"schedtrace=1", true},
		{"schedtrace=0", false},
		{MonitorTrace + ",schedtrace=0", false},
		{"schedtrace=0," + MonitorTrace, true},
		{MonitorTrace + ",schedtrace=bogus", true},      // skipped: the earlier value stands
		{MonitorTrace + ",schedtrace=2147483648", true}, // over 32 bits: skipped too
		{"schedtrace=-5", false},
		{"schedtrace", false},
		{"xschedtrace=5", false},
	} {
		if got := MonitorAwake(tc.godebug); got != tc.awake {
			t.Errorf("MonitorAwake(%q) = %v; want %v", tc.godebug, got, tc.awake)
		}
	}
}
