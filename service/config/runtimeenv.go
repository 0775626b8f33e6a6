package config

import (
	"math"
	"strconv"
)

// GOMEMLIMIT is the Go runtime's soft memory limit. Like GOMAXPROCS it is
// not a CLUSTERAPP_* setting, but the environment file passes it to the
// workers, and a worker derives one from its cgroup when it is unset
// (CLUSTERAPP_MEMORY_LIMIT_RATIO).
//
// Unlike GOMAXPROCS, the runtime does not ignore a value it cannot parse:
// it prints it and dies before main (`fatal error: malformed GOMEMLIMIT`),
// so no worker code runs, not even its crash-loop pacing. Under the shipped
// unit (Restart=always, RestartSec=0) a GOMEMLIMIT=512M (systemd's way of
// writing sizes, not Go's) restarted a worker 136 times in 5 s, wrote
// about 1000 journal lines a second and answered nothing. The generator
// keeps such a value away from the workers (UnsetEnvironment=) and says so.
const GOMEMLIMIT = "GOMEMLIMIT"

// GOMEMLIMITApplies reports whether the Go runtime starts with v as
// GOMEMLIMIT: "off", or a byte count that parseByteCount in runtime/string.go
// accepts (digits, with an optional B, KiB, MiB, GiB or TiB suffix). An
// empty value means unset to the runtime, and is not passed here.
func GOMEMLIMITApplies(v string) bool {
	if v == "off" {
		return true
	}
	_, ok := parseByteCount(v)
	return ok
}

// parseByteCount is the runtime's (runtime/string.go, Go 1.26), which it
// does not export; TestGOMEMLIMITAgreesWithTheRuntime holds them together.
func parseByteCount(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	last := s[len(s)-1]
	if last >= '0' && last <= '9' {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		return n, true
	}
	if last != 'B' || len(s) < 2 {
		return 0, false
	}
	if c := s[len(s)-2]; c >= '0' && c <= '9' {
		n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		return n, true
	} else if c != 'i' {
		return 0, false
	}
	if len(s) < 4 {
		return 0, false
	}
	power := 0
	switch s[len(s)-3] {
	case 'K':
		power = 1
	case 'M':
		power = 2
	case 'G':
		power = 3
	case 'T':
		power = 4
	default:
		return 0, false
	}
	m := uint64(1)
	for range power {
		m *= 1024
	}
	n, err := strconv.ParseInt(s[:len(s)-3], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	un := uint64(n)
	if un > math.MaxUint64/m {
		return 0, false
	}
	un *= m
	if un > uint64(math.MaxInt64) {
		return 0, false
	}
	return int64(un), true
}

// GOMEMLIMITAdvice says what a GOMEMLIMIT the runtime refuses would do, and
// what the generator does instead.
const GOMEMLIMITAdvice = "not a size the Go runtime accepts (a byte count with an optional B, KiB, MiB, GiB or TiB suffix, " +
	"such as 512MiB, or off), and it would stop every worker before it starts; the workers start without it " +
	"(their limit then follows MemoryMax=/MemoryHigh=, CLUSTERAPP_MEMORY_LIMIT_RATIO) until it is fixed"

// GOGC is the Go runtime's collector target. The runtime applies "off" or
// a whole number (strconv.ParseInt(v, 10, 32)); anything else ("50%",
// "200 ") it replaces with 100 without a word. Only a warning: the worker
// runs as it would without it.
const GOGC = "GOGC"

// GOGCApplies reports whether the Go runtime applies v as GOGC.
func GOGCApplies(v string) bool {
	if v == "off" {
		return true
	}
	_, err := strconv.ParseInt(v, 10, 32)
	return err == nil
}
