package systemd_test

import (
	"fmt"
	"os"
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
		// sizes and percentages operators write
		"32M", "32768K", "33554432", "768M", "1G", "2T", "1%", "40%", "100%", "infinity",
		// fractions and compound sizes, computed as systemd computes them
		"1.5G", "1.25G", "0.5G", "1.G", "4.5T", "0.03125G", "1G512M", "1T512G", "33554432B", "1E", "15E",
		"1.2345678901234567890G", "32.0001M", "40.5%", "99.99%", "1.05%",
		// too small, zero, out of range or not a size
		"0", "0%", "0.0G", "0.00%", "1", "16M", "31M", "31.99M", "1K1", "0.5%", "16E", "150%", "100.5%",
		"1.999999999999999999999G", "lots", "-1", "1g", "1Gi", "512MB", ".5G", "1M1G", "40.%", "1.234%",
		// whitespace and signs
		"1 G", "1.5 G", "+1G",
	}
	memoryOnPurpose = map[string]string{
		"0":      "ignored",
		"0%":     "ignored",
		"0.0G":   "ignored",
		"0.00%":  "ignored",
		"1":      "too small",
		"16M":    "too small",
		"31M":    "too small",
		"31.99M": "too small",
		"1K1":    "too small",
		"0.5%":   "below 1%",
		"1 G":    "clusterapp refuses whitespace in every variable",
		"1.5 G":  "clusterapp refuses whitespace in every variable",
		"+1G":    "clusterapp takes digits, without a sign",
	}
)

// CLUSTERAPP_MEMORY_MAX against MemoryMax= in the real systemd: every size
// clusterapp takes, systemd applies as the same number of bytes, and every
// percentage as the same share of the machine's memory; every value systemd
// applies, clusterapp takes, apart from those it refuses on purpose: 0,
// which systemd ignores ("out of range": no limit), and sizes a worker
// cannot run under (config.MinMemory).
func TestMemoryLimitsAgreeWithSystemd(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Bare: true})
	for i, v := range memoryCorpus {
		b.WriteFile(fmt.Sprintf("/etc/systemd/system/mem%d.service", i),
			"[Service]\nExecStart=/bin/true\nMemoryMax="+v+"\n") // as the generator writes it: MemoryMax= takes no specifiers
	}
	b.Must("systemctl", "daemon-reload")
	var machine uint64 // what systemd reads as 100%: the machine's memory
	for i, v := range memoryCorpus {
		if v == "100%" {
			machine, _ = strconv.ParseUint(b.Show(fmt.Sprintf("mem%d.service", i), "MemoryMax"), 10, 64)
		}
	}
	if machine == 0 {
		t.Fatal("systemd did not apply MemoryMax=100%")
	}
	page := uint64(os.Getpagesize())
	for i, v := range memoryCorpus {
		got := b.Show(fmt.Sprintf("mem%d.service", i), "MemoryMax")
		applied := got != "infinity"
		_, err := config.LoadVars(map[string]string{config.Prefix + "_MEMORY_MAX": v})
		ours := err == nil
		why, purpose := memoryOnPurpose[v]
		n, _ := strconv.ParseUint(got, 10, 64)
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
		case ours && strings.HasSuffix(v, "%"):
			// physical_memory_scale: whole pages, scaled, rounded down
			p, ok := config.MemoryPermyriad(v)
			if want := machine / page * uint64(p) / 10000 * page; !ok || (p < 10000 && n != want) {
				t.Errorf("%q: clusterapp reads %d/10000 of the memory (%d bytes), systemd %s", v, p, want, got)
			}
		case ours && v != "infinity":
			if want, ok := config.MemoryBytes(v); !ok || n != want {
				t.Errorf("%q: clusterapp reads %d bytes, systemd %s", v, want, got)
			}
		}
		t.Logf("%-10q clusterapp takes it: %-5v systemd: MemoryMax=%s", v, ours, got)
	}
}
