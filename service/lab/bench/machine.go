package bench

import (
	"os"
	"runtime"
	"strings"
)

// Machine describes where the benchmark ran.
type Machine struct {
	CPUs   int    // runtime.NumCPU, what nproc prints
	Model  string // "model name" of /proc/cpuinfo
	Kernel string // /proc/sys/kernel/osrelease
	Go     string // the Go release the binaries were built with
}

// DetectMachine reads the machine's description; a field it cannot read is
// "unknown".
func DetectMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Model: "unknown", Kernel: "unknown", Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if model := cpuModel(string(b)); model != "" {
			m.Model = model
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// cpuModel returns the first "model name" of /proc/cpuinfo, "" if none.
func cpuModel(cpuinfo string) string {
	for _, line := range strings.Split(cpuinfo, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}

// LoadAverage returns the 1, 5 and 15 minute load averages of
// /proc/loadavg, "unknown" if it cannot be read. The report prints it before
// and after the run: other work on the machine moves every number.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(b))
	if len(fields) < 3 {
		return "unknown"
	}
	return strings.Join(fields[:3], " ")
}
