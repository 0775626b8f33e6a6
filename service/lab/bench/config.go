package bench

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/clusterapp/clusterapp/service/config"
)

// Configuration is one named set-up of the suite: the body of
// /etc/clusterapp/clusterapp.env and a sentence saying exactly what it is.
type Configuration struct {
	// Name labels the configuration in tables and the chart.
	Name string
	// Env is written verbatim to /etc/clusterapp/clusterapp.env. Variables
	// other than CLUSTERAPP_* (GOMAXPROCS) reach the workers too: the unit
	// reads the file with EnvironmentFile=.
	Env string
	// Note describes the configuration for the report.
	Note string
	// WorkerDropIn, when set, is written as a drop-in for every worker unit
	// (WorkerDropInPath) while the configuration runs, for settings an env
	// file cannot make, such as CPUAffinity=.
	WorkerDropIn string
}

// WorkerDropInPath is where a configuration's WorkerDropIn goes in the box.
const WorkerDropInPath = "/etc/systemd/system/" + config.WorkerTemplate + ".d/90-bench.conf"

// Workers returns the number of workers the configuration runs: its
// CLUSTERAPP_WORKERS, with 0 or absent meaning one per CPU (cpus), as the
// generator does.
func (c Configuration) Workers(cpus int) (int, error) {
	value, ok := envValue(c.Env, "CLUSTERAPP_WORKERS")
	if !ok || value == "" {
		return cpus, nil
	}
	n, err := strconv.Atoi(value)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("configuration %q: CLUSTERAPP_WORKERS=%q is not a whole number", c.Name, value)
	}
	if n == 0 {
		return cpus, nil
	}
	return n, nil
}

// envValue returns the last value of key in an env-file body (later lines
// win, as in systemd), without surrounding quotes.
func envValue(body, key string) (value string, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, found := strings.Cut(line, "=")
		if !found || strings.HasPrefix(line, "#") || strings.TrimSpace(k) != key {
			continue
		}
		value, ok = strings.Trim(strings.TrimSpace(v), `"'`), true
	}
	return value, ok
}

// commonEnv is in every configuration: the result cache and the per-client
// rate limit are off (their defaults, written out so the report can say so),
// so /fib stays an honest CPU workload and one generator is not throttled.
const commonEnv = "CLUSTERAPP_CACHE_ENTRIES=0\nCLUSTERAPP_RATE_LIMIT=0\n"

// DefaultConfigurations returns the throughput configurations for a machine
// with cpus CPUs. The first is the reference the fixed-rate load is derived
// from (1 worker, like one Node.js process on one core); the one named
// BaselineName is one process that may use every core.
//
// To compare a new knob, add a configuration: its name, its env-file body
// and a sentence, as "N workers, no balance" does.
func DefaultConfigurations(cpus int) []Configuration {
	nWorkers := fmt.Sprintf("CLUSTERAPP_WORKERS=%d\n", cpus) + commonEnv
	return []Configuration{
		{
			Name: "1 worker",
			Env:  "CLUSTERAPP_WORKERS=1\nGOMAXPROCS=1\n" + commonEnv,
			Note: "one worker unit, GOMAXPROCS=1: one core, like one Node.js process",
		},
		{
			Name: NWorkersName,
			Env:  nWorkers,
			Note: fmt.Sprintf("%d worker units sharing %s, GOMAXPROCS unset: each worker sizes its own (as many Ps as its admission slots, its share of the %d CPUs, and one more while long requests hold them); balancing at its defaults (least-connections accept gate on, keep-alive connections closed after 1000 requests)", cpus, config.SocketUnit, cpus),
		},
		{
			Name: "N workers, no balance",
			Env:  nWorkers + "CLUSTERAPP_BALANCE=false\nCLUSTERAPP_KEEPALIVE_REQUESTS=0\nCLUSTERAPP_KEEPALIVE_TIME=0\n",
			Note: "as N workers, with the accept gate off and unlimited keep-alive (no request or time bound): whoever accepts first keeps the connection",
		},
		{
			Name: BaselineName,
			Env:  fmt.Sprintf("CLUSTERAPP_WORKERS=1\nGOMAXPROCS=%d\n", cpus) + commonEnv,
			Note: fmt.Sprintf("one worker unit, GOMAXPROCS=%d: one Go process using every core, the baseline a pool must match", cpus),
		},
	}
}

// Names of the configurations the report computes ratios against.
const (
	NWorkersName = "N workers"
	BaselineName = "1 process"
)

// FaultConfiguration is the pool of the fault scenario: cpus workers at the
// shipped defaults, with a watchdog timeout (30s) longer than a frozen
// worker's run, so systemd does not end the freeze half-way through.
func FaultConfiguration(cpus int) Configuration {
	return Configuration{
		Name: NWorkersName + ", watchdog 30s",
		Env:  fmt.Sprintf("CLUSTERAPP_WORKERS=%d\n", cpus) + commonEnv + "CLUSTERAPP_WATCHDOG_SEC=30s\n",
		Note: "the N workers pool, its watchdog timeout raised so a frozen worker stays frozen for the whole run",
	}
}

// SpikeLayout splits the machine between the pool and the load generator
// for the spike scenario. Its targets are about the server (how fast it
// turns away what it cannot serve, how its admitted requests fare), and a
// generator sending thousands of requests a second on the pool's CPUs makes
// both of them wait for the generator, which hid the server's own numbers
// (docs/benchmarks.md, notes, "Before this layout"). With
// two CPUs or more the generator gets the last one to itself, as a load
// machine of its own would, and the pool the others, one worker each.
type SpikeLayout struct {
	PoolCPUs string // CPUAffinity= of the workers, e.g. "0-6"; "" shares every CPU
	LoadCPUs string // taskset -c list of the generator; "" shares every CPU
	Workers  int    // one per pool CPU
}

// NewSpikeLayout returns the layout for a machine with cpus CPUs.
func NewSpikeLayout(cpus int) SpikeLayout {
	switch {
	case cpus < 2:
		return SpikeLayout{Workers: 1}
	case cpus == 2:
		return SpikeLayout{PoolCPUs: "0", LoadCPUs: "1", Workers: 1}
	default:
		return SpikeLayout{PoolCPUs: fmt.Sprintf("0-%d", cpus-2), LoadCPUs: fmt.Sprint(cpus - 1), Workers: cpus - 1}
	}
}

// Describe says where the pool and the generator run, for the report.
func (l SpikeLayout) Describe() string {
	if l.PoolCPUs == "" {
		return fmt.Sprintf("%d worker(s) and the generator share every CPU (one CPU only: nothing to split)", l.Workers)
	}
	return fmt.Sprintf("the pool, %d worker(s), on CPU %s (a `CPUAffinity=%s` drop-in); the generator on CPU %s (`taskset -c %s`), so neither takes CPU from the other",
		l.Workers, l.PoolCPUs, l.PoolCPUs, l.LoadCPUs, l.LoadCPUs)
}

// SpikeConfigurations returns the two configurations of the spike
// scenario, protection on and off, in layout. Each worker gets one
// admission slot (one per CPU it runs on), set explicitly: the unit
// generator derives the default from the machine's CPUs and cannot see
// CPUAffinity=. GOMAXPROCS is left to Go (one per allowed CPU), which the
// worker raises by one so its serving path keeps a P of its own.
func SpikeConfigurations(layout SpikeLayout, admissionWait string) (on, off Configuration) {
	base := fmt.Sprintf("CLUSTERAPP_WORKERS=%d\n", layout.Workers) + commonEnv
	dropIn := ""
	if layout.PoolCPUs != "" {
		dropIn = "[Service]\nCPUAffinity=" + layout.PoolCPUs + "\n"
	}
	on = Configuration{
		Name:         "protection on",
		Env:          base + "CLUSTERAPP_MAX_IN_FLIGHT=1\nCLUSTERAPP_ADMISSION_WAIT=" + admissionWait + "\n",
		Note:         fmt.Sprintf("admission control with one request in flight per worker (one per CPU), a free slot awaited at most %s, then 503 with Retry-After", admissionWait),
		WorkerDropIn: dropIn,
	}
	off = Configuration{
		Name:         "protection off",
		Env:          base + "CLUSTERAPP_MAX_IN_FLIGHT=65536\nCLUSTERAPP_ADMISSION_WAIT=10s\n",
		Note:         "admission control as close to off as the configuration allows: 65536 requests in flight per worker, 10s wait; every request queues for a CPU",
		WorkerDropIn: dropIn,
	}
	return on, off
}
