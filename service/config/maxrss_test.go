package config

import (
	"strings"
	"testing"
)

func TestMaxRSSValues(t *testing.T) {
	for _, tc := range []struct {
		value string
		bytes uint64 // on a machine of 8 GiB; 0 for refused or never
		err   string
	}{
		{"", 0, ""},
		{"512M", 512 << 20, ""},
		{"1.5G", 1610612736, ""},
		{"10%", 858993459, ""},
		{"lots", 0, "CLUSTERAPP_MAX_RSS=\"lots\" is invalid: expected empty (never), a size from 32M"},
		{"16M", 0, "under that limit every worker would recycle"},
		{"0", 0, "under that limit every worker would recycle"},
		{"0.5%", 0, "under that limit every worker would recycle"},
		{"infinity", 0, "leave MAX_RSS empty for that"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Setenv("CLUSTERAPP_MAX_RSS", tc.value)
			c, err := Load()
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			case err == nil:
				if got := c.MaxRSSBytes(8 << 30); got != tc.bytes {
					t.Fatalf("MaxRSSBytes = %d, want %d", got, tc.bytes)
				}
			}
		})
	}
}

// At or over MemoryMax=, the kernel's OOM kill comes first: said, with a
// value that would work.
func TestMaxRSSAdvice(t *testing.T) {
	for _, tc := range []struct {
		rss, max string
		want     string
	}{
		{"512M", "1G", ""},
		{"512M", "", ""},
		{"", "1G", ""},
		{"1G", "1G", "is not below CLUSTERAPP_MEMORY_MAX=1G: the kernel kills a worker at MemoryMax= (SIGKILL, its requests lost) before it could recycle; set it lower, such as 819M"},
		{"2G", "10%", "set it lower, such as 655M"}, // 10% of 8 GiB
		{"5%", "1G", ""},
		{"512M", "infinity", ""},
	} {
		got := MaxRSSAdvice(tc.rss, tc.max, 8<<30)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("MaxRSSAdvice(%q, %q) = %q, want %q", tc.rss, tc.max, got, tc.want)
		}
	}
}
