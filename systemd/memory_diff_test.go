package systemd_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// memoryCorpus holds CLUSTERAPP_MEMORY_MAX values. memoryOnPurpose lists
// forms systemd takes, or ignores, that clusterapp refuses, with why; the
// test checks that systemd does what the reason says, so the list stays
// true.
var (
	memoryCorpus = []string{
		"32M", "32768K", "33554432", "768M", "1G", "2T", "1%", "40%", "100%", "infinity",
		"0", "0%", "1", "16M", "31M", "150%", "lots", "-1", "1 G", "1g", "1.5G", "1Gi", "512MB", "1E",
	}
	memoryOnPurpose = map[string]string{
		"0":    "ignored",
		"0%":   "ignored",
		"1":    "too small",
		"16M":  "too small",
		"31M":  "too small",
		"1.5G": "a fraction: clusterapp takes whole numbers (1536M)",
		"1E":   "more memory than any machine has; clusterapp takes K, M, G, T",
		"1 G":  "clusterapp refuses whitespace in every variable",
	}
)

// CLUSTERAPP_MEMORY_MAX against MemoryMax= in the real systemd: every size
// clusterapp takes, systemd applies as the same number of bytes (every
// percentage, it applies); every value systemd applies, clusterapp takes,
// apart from those it refuses on purpose: 0, which systemd ignores ("out
// of range": no limit), and sizes a worker cannot run under
// (config.MinMemory).
func TestMemoryLimitsAgreeWithSystemd(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Bare: true})
	for i, v := range memoryCorpus {
		b.WriteFile(fmt.Sprintf("/etc/systemd/system/mem%d.service", i),
			"[Service]\nExecStart=/bin/true\nMemoryMax="+v+"\n") // as the generator writes it: MemoryMax= takes no specifiers
	}
	b.Must("systemctl", "daemon-reload")
	for i, v := range memoryCorpus {
		got := b.Show(fmt.Sprintf("mem%d.service", i), "MemoryMax")
		applied := got != "infinity"
		_, err := config.LoadVars(map[string]string{config.Prefix + "_MEMORY_MAX": v})
		ours := err == nil
		why, purpose := memoryOnPurpose[v]
		switch {
		case purpose && why == "ignored" && applied:
			t.Errorf("%q is listed as ignored by systemd, but it applies MemoryMax=%s", v, got)
		case purpose && why != "ignored" && !applied:
			t.Errorf("%q is listed as refused on purpose (%s), but systemd ignores it too: drop it from the list", v, why)
		case purpose && ours:
			t.Errorf("%q is listed as refused on purpose (%s), but clusterapp takes it", v, why)
		case ours && v != "infinity" && !applied:
			t.Errorf("%q: clusterapp takes it, systemd ignores it (MemoryMax=%s)", v, got)
		case !ours && applied && !purpose:
			t.Errorf("%q: systemd applies MemoryMax=%s, clusterapp refuses it: %v", v, got, err)
		case ours && !strings.HasSuffix(v, "%") && v != "infinity":
			want, ok := config.MemoryBytes(v)
			if n, _ := strconv.ParseUint(got, 10, 64); !ok || n != want {
				t.Errorf("%q: clusterapp reads %d bytes, systemd %s", v, want, got)
			}
		}
		t.Logf("%-10q clusterapp takes it: %-5v systemd: MemoryMax=%s", v, ours, got)
	}
}
