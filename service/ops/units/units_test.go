package units

import (
	"math"
	"testing"
	"time"
)

func TestWorkerFromProps(t *testing.T) {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	w := workerFromProps("clusterapp-worker@2.service", map[string]any{
		"ActiveState": "active", "SubState": "running", "Result": "success",
		"MainPID": uint32(4242), "NRestarts": uint32(3),
		"ExecMainStartTimestamp":     uint64(start.UnixMicro()),
		"MemoryCurrent":              uint64(math.MaxUint64), // no memory controller
		"CPUUsageNSec":               uint64(1500000000),
		"StatusText":                 "serving: 1 requests served, 0 in flight, 0 queued, 1 connections open",
		"LimitNOFILESoft":            uint64(65536),
		"WatchdogUSec":               uint64(10_000_000),
		"WatchdogTimestamp":          uint64(start.Add(time.Second).UnixMicro()),
		"WatchdogTimestampMonotonic": uint64(375_934_010),
	})
	if w.Watchdog != 10*time.Second || !w.LastPing.Equal(start.Add(time.Second)) || w.LastPingMono != 375_934_010*time.Microsecond {
		t.Errorf("watchdog %v, last ping %v (monotonic %v)", w.Watchdog, w.LastPing, w.LastPingMono)
	}
	if w.Number != 2 || w.PID != 4242 || w.Restarts != 3 || !w.Started.Equal(start) || !w.Active() || w.LimitNOFILE != 65536 {
		t.Errorf("got %+v", w)
	}
	if w.MemoryBytes != nil {
		t.Errorf("UINT64_MAX memory reported as %d, want absent", *w.MemoryBytes)
	}
	if w.CPU == nil || *w.CPU != 1500*time.Millisecond {
		t.Errorf("cpu %v", w.CPU)
	}
}

func TestSocketFromProps(t *testing.T) {
	s := socketFromProps(map[string]any{
		"LoadState": "loaded", "ActiveState": "active", "SubState": "listening",
		"Backlog": uint32(4096), "Listen": [][]any{{"Stream", "[::]:8080"}},
	})
	if s.Backlog != 4096 || len(s.Listen) != 1 || s.Listen[0] != "[::]:8080" || s.SubState != "listening" {
		t.Errorf("got %+v", s)
	}
}
