package bench

import (
	"bufio"
	"regexp"
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

// gomaxprocsLine is one worker's go_sched_gomaxprocs_threads in a scrape of
// the pool's metrics listener.
var gomaxprocsLine = regexp.MustCompile(`(?m)^go_sched_gomaxprocs_threads\{worker="([^"]+)"\} (\d+)$`)

// parseGOMAXPROCS reads every worker's GOMAXPROCS from one scrape.
func parseGOMAXPROCS(scrape string) map[string]int {
	out := map[string]int{}
	for _, m := range gomaxprocsLine.FindAllStringSubmatch(scrape, -1) {
		n, _ := strconv.Atoi(m[2]) // \d+: only overflow fails
		out[m[1]] = n
	}
	return out
}
