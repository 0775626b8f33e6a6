package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CLUSTERAPP_MEMORY_MAX and _HIGH are written into the workers' drop-in as
// MemoryMax= and MemoryHigh= unchanged, so systemd is what reads them; the
// parsers here only have to agree with it on what it applies, and
// TestMemoryLimitsAgreeWithSystemd (package systemd) holds them against the
// real one. They follow systemd 252's config_parse_memory_limit: a
// percentage of the machine's memory (parse_permyriad: up to two decimals,
// at most 100%), else a size (parse_size, base 1024): a whole number with an
// optional decimal fraction and one of the suffixes E, P, T, G, M, K, B or
// none, possibly several such parts in decreasing order ("1G512M"). What
// systemd reads as zero or as 2^64-1 and more it ignores ("out of range"),
// applying no limit. clusterapp refuses on top of that what it refuses in
// every variable (whitespace, a sign) and values a worker cannot run under
// (below MinMemory, or below 1%).

// MinMemory is the smallest size CLUSTERAPP_MEMORY_MAX and _HIGH take. A
// worker holds 17-24 MiB (docs/benchmarks.md); measured under a cgroup
// memory limit, it started but answered nothing with 8M, and served with 16M
// at the limit; systemd applies any size from 1 byte. 0 and 0% it ignores
// ("out of range") and applies no limit: refused too, so the file says what
// it does (empty for no limit).
const MinMemory = "32M"

// minMemoryBytes is MinMemory in bytes.
const minMemoryBytes = 32 << 20

// minMemoryPermyriad is the smallest percentage taken, 1%, in 1/10000.
const minMemoryPermyriad = 100

// validMemory accepts what systemd's MemoryHigh=/MemoryMax= apply that a
// worker can run under: no size below MinMemory, no percentage below 1%.
func validMemory(s string) bool {
	if s == "" || s == "infinity" {
		return true
	}
	if p, ok := MemoryPermyriad(s); ok {
		return p >= minMemoryPermyriad
	}
	n, ok := MemoryBytes(s)
	return ok && n >= minMemoryBytes
}

// memorySuffixes are parse_size's suffixes for base 1024, largest first;
// each part of a size takes a suffix after the previous part's.
var memorySuffixes = []struct {
	suffix string
	factor uint64
}{{"E", 1 << 60}, {"P", 1 << 50}, {"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}, {"", 1}}

// MemoryBytes is the size s (CLUSTERAPP_MEMORY_MAX or _HIGH, not a
// percentage or infinity) in bytes as systemd reads it, or false when
// systemd would not apply it as a size: not a size, or out of range (0,
// 2^64-1 or more). The fraction is computed the way systemd computes it, in
// floating point, truncated: 1.5G is 1610612736, 0.1K is 102.
func MemoryBytes(s string) (uint64, bool) {
	n, ok := parseSize(s)
	if !ok || n == 0 || n == math.MaxUint64 {
		return 0, false
	}
	return n, true
}

// parseSize is systemd's parse_size(s, 1024) without the whitespace and
// the sign it skips: false for what it refuses, and for a sum past 2^64-1.
func parseSize(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	var total uint64
	next := 0 // the first suffix this part may take
	for p := s; p != ""; {
		i := 0
		for i < len(p) && isDigit(p[i]) {
			i++
		}
		if i == 0 {
			return 0, false
		}
		whole, err := strconv.ParseUint(p[:i], 10, 64)
		if err != nil {
			return 0, false
		}
		p = p[i:]
		frac := 0.0
		if rest, ok := strings.CutPrefix(p, "."); ok {
			p = rest
			j := 0
			for j < len(p) && isDigit(p[j]) {
				j++
			}
			if j > 0 {
				digits, err := strconv.ParseUint(p[:j], 10, 64)
				if err != nil {
					return 0, false
				}
				frac = float64(digits)
				for range j {
					frac /= 10
				}
				p = p[j:]
			}
		}
		k := next
		for k < len(memorySuffixes) && !strings.HasPrefix(p, memorySuffixes[k].suffix) {
			k++
		}
		if k == len(memorySuffixes) {
			return 0, false
		}
		f := memorySuffixes[k].factor
		carry := uint64(0)
		if frac > 0 {
			carry = 1
		}
		if whole > math.MaxUint64/f-carry {
			return 0, false
		}
		part := whole*f + uint64(frac*float64(f))
		if part > math.MaxUint64-total {
			return 0, false
		}
		total += part
		p = p[len(memorySuffixes[k].suffix):]
		next = k + 1
	}
	return total, true
}

// MemoryPermyriad is the percentage s in 1/10000 of the machine's memory
// (40% is 4000, 40.5% 4050, 0.05% 5), as parse_permyriad reads a
// percentage; false when s is not one, or above 100%.
func MemoryPermyriad(s string) (int, bool) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, false
	}
	whole, dec, dot := strings.Cut(num, ".")
	if whole == "" || !allDigits(whole) || (dot && (len(dec) < 1 || len(dec) > 2 || !allDigits(dec))) || len(whole) > 5 {
		return 0, false
	}
	v, _ := strconv.Atoi(whole)
	q := 0
	if dot {
		q, _ = strconv.Atoi(dec)
		if len(dec) == 1 {
			q *= 10
		}
	}
	v = v*100 + q
	if v > 10000 {
		return 0, false
	}
	return v, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// memoryDetail says why a value systemd reads is refused.
func memoryDetail(s string) string {
	if p, ok := MemoryPermyriad(s); ok {
		switch {
		case p == 0:
			return ` (systemd ignores 0% and applies no limit: leave it empty for that)`
		case p < minMemoryPermyriad:
			return " (below 1%: a worker holds 17-24 MiB, more than 1% of a 2 GiB machine; write a size for less)"
		}
		return ""
	}
	n, ok := parseSize(s)
	switch {
	case ok && n == 0:
		return ` (systemd ignores 0 and applies no limit: leave it empty for that)`
	case ok && n < minMemoryBytes:
		return " (a worker holds 17-24 MiB: below " + MinMemory + " the kernel kills it or reclaims from it until it stops answering)"
	}
	return ""
}

// rssDetail says why CLUSTERAPP_MAX_RSS=s is refused when its syntax is
// right: a limit no worker can serve under would recycle every worker
// again and again.
func rssDetail(s string) string {
	if s == "infinity" {
		return " (infinity is MEMORY_MAX's word for no limit: leave MAX_RSS empty for that)"
	}
	p, isPercent := MemoryPermyriad(s)
	n, isSize := parseSize(s)
	if (isPercent && p < minMemoryPermyriad) || (!isPercent && isSize && n < minMemoryBytes) {
		return " (a worker holds 17-24 MiB: under that limit every worker would recycle as soon as it may; leave it empty for never)"
	}
	return ""
}

// MaxRSSBytes is CLUSTERAPP_MAX_RSS in bytes, a percentage taken of
// physical bytes as systemd takes MemoryMax='s; 0 when it is empty (never)
// or not valid.
func (c Config) MaxRSSBytes(physical uint64) uint64 { return memoryLimitBytes(c.MaxRSS, physical) }

// memoryLimitBytes is a memory setting (CLUSTERAPP_MAX_RSS, _MEMORY_MAX,
// _MEMORY_HIGH) in bytes on a machine with physical bytes; 0 for none
// (empty, infinity) or a value not valid.
func memoryLimitBytes(s string, physical uint64) uint64 {
	if s == "" || s == "infinity" || !validMemory(s) {
		return 0
	}
	if p, ok := MemoryPermyriad(s); ok {
		return uint64(float64(physical) * float64(p) / 10000)
	}
	n, _ := MemoryBytes(s)
	return n
}

// MaxRSSAdvice says what is wrong with CLUSTERAPP_MAX_RSS=maxRSS beside
// CLUSTERAPP_MEMORY_MAX=memoryMax on a machine with physical bytes, ""
// when nothing: at or over the hard limit, the kernel's OOM kill comes
// before the recycle. The worker logs it and `clusterapp config --check`
// prints it.
func MaxRSSAdvice(maxRSS, memoryMax string, physical uint64) string {
	rss, hard := memoryLimitBytes(maxRSS, physical), memoryLimitBytes(memoryMax, physical)
	if rss == 0 || hard == 0 || rss < hard {
		return ""
	}
	return fmt.Sprintf("CLUSTERAPP_MAX_RSS=%s is not below CLUSTERAPP_MEMORY_MAX=%s: the kernel kills a worker at MemoryMax= (SIGKILL, its requests lost) before it could recycle; set it lower, such as %s", maxRSS, memoryMax, sizeOf(hard*8/10))
}

// sizeOf writes bytes as a size both systemd and CLUSTERAPP_MAX_RSS take,
// rounded down to a whole MiB.
func sizeOf(b uint64) string { return strconv.FormatUint(b>>20, 10) + "M" }

// PhysicalMemory is the machine's memory in bytes, which a percentage of
// MemoryMax= and CLUSTERAPP_MAX_RSS is taken of (sysinfo's total RAM); 0
// when it cannot be read.
func PhysicalMemory() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
