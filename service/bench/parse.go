package bench

import (
	"bufio"
	"strconv"
	"strings"
)

// Worker is what systemd and /proc say about one worker after a load.
type Worker struct {
	Unit     string `json:"unit"`
	PID      int    `json:"pid"`
	Restarts int    `json:"restarts"` // NRestarts
	RSS      int    `json:"rss_kib"`  // VmRSS
	PeakRSS  int    `json:"peak_rss_kib"`
}

// parseProperties reads `systemctl show` output (KEY=VALUE lines).
func parseProperties(out string) map[string]string {
	props := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			props[k] = v
		}
	}
	return props
}

// parseStatusMemory returns VmRSS and VmHWM (peak resident set) in KiB from
// /proc/PID/status; 0 for a line that is missing.
func parseStatusMemory(status string) (rss, peak int) {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		n, err := strconv.Atoi(fields[1])
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			rss = n
		case "VmHWM:":
			peak = n
		}
	}
	return rss, peak
}

// parseGOMAXPROCS reads a `curl -D -` response of /metrics: the X-Worker
// header and the go_sched_gomaxprocs_threads gauge.
func parseGOMAXPROCS(out string) (worker string, procs int, ok bool) {
	var haveProcs bool
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if k, v, found := strings.Cut(line, ":"); found && strings.EqualFold(k, "X-Worker") {
			worker = strings.TrimSpace(v)
		}
		if v, found := strings.CutPrefix(line, "go_sched_gomaxprocs_threads "); found {
			f, err := strconv.ParseFloat(v, 64)
			procs, haveProcs = int(f), err == nil
		}
	}
	return worker, procs, worker != "" && haveProcs
}
