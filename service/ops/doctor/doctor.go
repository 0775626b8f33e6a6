// Package doctor checks that what the operator asked for is in effect:
// the settings in /etc/clusterapp/clusterapp.env and the units on one side,
// what the kernel and systemd actually apply on the other. Each check says
// how to close the gap it finds.
//
// The checks are pure functions of Facts, which Gather collects from
// systemd (over the Systemd interface), /proc/sys, /proc/PID/limits and
// /proc/net. That keeps each judgement testable without a machine in the
// wrong state.
//
// A check fails (Problem) when the operator's intent is not in effect and
// can be fixed; it warns (Warning) for what deserves a look but may be
// fine, e.g. listen-queue overflows counted since boot, or an open-file
// limit that the service manager itself cannot raise (a container whose
// PID 1 lacks CAP_SYS_RESOURCE).
package doctor

import (
	"fmt"
	"strings"
)

// Severity of a Finding.
type Severity int

// Severities, in increasing order.
const (
	OK Severity = iota
	Warning
	Problem
)

func (s Severity) String() string {
	return [...]string{"ok", "warn", "FAIL"}[s]
}

// Finding is the outcome of one check.
type Finding struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Detail   string   `json:"detail"`
	// Fix says what to do; empty when OK.
	Fix string `json:"fix,omitempty"`
}

// MarshalText writes a severity as `doctor --json` shows it: ok, warning
// or problem.
func (s Severity) MarshalText() ([]byte, error) {
	return []byte([...]string{"ok", "warning", "problem"}[s]), nil
}

// Problems counts the findings of Problem severity.
func Problems(fs []Finding) int {
	n := 0
	for _, f := range fs {
		if f.Severity == Problem {
			n++
		}
	}
	return n
}

// Evaluate runs every check on facts.
func Evaluate(f Facts) []Finding {
	var out []Finding
	out = append(out, checkSocket(f))
	out = append(out, checkSomaxconn(f))
	out = append(out, checkPortRange(f))
	out = append(out, checkWorkers(f)...)
	out = append(out, checkProgress(f)...)
	out = append(out, checkFileLimits(f)...)
	out = append(out, checkOverflows(f))
	out = append(out, checkHardening(f))
	return out
}

func ok(check, detail string) Finding { return Finding{Check: check, Detail: detail} }

func bad(sev Severity, check, detail, fix string) Finding {
	return Finding{Check: check, Severity: sev, Detail: detail, Fix: fix}
}

func join(xs []string) string { return strings.Join(xs, ", ") }

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
