package units

import (
	"math"
	"testing"
	"time"
)

func TestParseStatusText(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Load
		ok   bool
	}{
		{"serving: 1234 requests served, 3 in flight, 17 connections open", Load{1234, 3, 17}, true},
		{"serving: 0 requests served, 0 in flight, 0 connections open", Load{}, true},
		{"draining: signal terminated", Load{}, false},
		{"", Load{}, false},
		{"serving: many requests served, 1 in flight, 1 connections open", Load{}, false},
	} {
		got, ok := ParseStatusText(tc.text)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseStatusText(%q) = %+v, %v; want %+v, %v", tc.text, got, ok, tc.want, tc.ok)
		}
	}
}

func TestInstance(t *testing.T) {
	if n, ok := Instance("clusterapp-worker@12.service"); !ok || n != 12 {
		t.Errorf("got %d %v", n, ok)
	}
	for _, bad := range []string{"clusterapp.socket", "clusterapp-worker@x.service", "other@1.service"} {
		if _, ok := Instance(bad); ok {
			t.Errorf("Instance(%q) accepted", bad)
		}
	}
	if WorkerUnit(3) != "clusterapp-worker@3.service" {
		t.Error(WorkerUnit(3))
	}
}

func TestWorkerFromProps(t *testing.T) {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	w := workerFromProps("clusterapp-worker@2.service", map[string]any{
		"ActiveState": "active", "SubState": "running", "Result": "success",
		"MainPID": uint32(4242), "NRestarts": uint32(3),
		"ExecMainStartTimestamp": uint64(start.UnixMicro()),
		"MemoryCurrent":          uint64(math.MaxUint64), // no memory controller
		"CPUUsageNSec":           uint64(1500000000),
		"StatusText":             "serving: 1 requests served, 0 in flight, 1 connections open",
		"LimitNOFILESoft":        uint64(65536),
	})
	if w.Instance != 2 || w.PID != 4242 || w.Restarts != 3 || !w.Started.Equal(start) || !w.Active() || w.LimitNOFILE != 65536 {
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
