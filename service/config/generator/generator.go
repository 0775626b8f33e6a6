// Package generator is clusterapp's systemd generator: it turns the
// operator's environment file into unit drop-ins, so every knob lives in
// /etc/clusterapp/clusterapp.env, including the ones systemd itself must
// apply (how many workers, where the socket listens, the workers' limits).
//
// systemd runs generators early at boot and on every `systemctl
// daemon-reload`, with three output directories; clusterapp writes to the
// first ("normal" priority, /run/systemd/generator), which ranks above the
// shipped units in /usr/lib but below /etc, so `systemctl edit` still
// overrides anything written here:
//
//   - clusterapp.target.d/50-workers.conf: Wants= on clusterapp-worker@1..N,
//     N = CLUSTERAPP_WORKERS or the number of CPUs. systemd 252 ignores
//     .wants/ symlink folders for generated template instances in some
//     cases; a Wants= drop-in is the form measured to work.
//   - clusterapp-worker@K.service.d/50-first.conf for K = 2..N: Wants=
//     and After= on clusterapp-first.target, which is ordered after worker
//     1, so on a cold start the worker a connection starts is up first
//     (docs/operations.md, "Worker 1 comes up first").
//   - clusterapp.socket.d/50-env.conf, only when CLUSTERAPP_LISTEN or
//     CLUSTERAPP_BACKLOG is set in the file: ListenStream= and Backlog=.
//   - clusterapp-metrics.socket.d/50-env.conf, only when
//     CLUSTERAPP_METRICS_LISTEN is set: its ListenStream= (or none, when
//     invalid: the metrics socket fails closed on its own, the service
//     socket is not affected).
//   - clusterapp-worker@.service.d/50-env.conf: WatchdogSec=, LimitNOFILE=,
//     MemoryHigh=, MemoryMax= and TimeoutStopSec= (the drain timeout plus a
//     margin, so systemd never SIGKILLs a drain still within its deadline);
//     UnsetEnvironment= for a GOMEMLIMIT the Go runtime cannot parse, which
//     would kill every worker before it starts (config.GOMEMLIMIT).
//
// The file is read exactly as systemd reads it for the workers (package
// envfile), so the units and the workers never see two different files. A
// generator must never fail the boot, and one bad line must not cost the
// operator the rest of the file: a line systemd skips is skipped with a
// warning, an invalid value of a setting systemd applies falls back to its
// default alone, with a warning. The listen address fails closed: when it
// is invalid, or the file cannot be read as systemd would, the socket is
// made to listen nowhere (its ListenStream= reset), never on the shipped
// address, which may be wider than the operator's. Every value reaches the
// unit files through package unitfile, which escapes it by systemd's rules.
// The Go runtime's variables the file passes to the workers are read as the
// runtime reads them (GOMEMLIMIT, GOMAXPROCS, GOGC in package config), and a
// variable systemd sets for each worker (config.SystemdSets) is an error.
// Warnings go to the journal.
package generator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/config/envfile"
	"github.com/clusterapp/clusterapp/service/config/unitfile"
)

// WorkerDefaultKey is the one variable the generator gives the workers itself
// (an Environment= line, the pool's share of the CPUs), which the env file
// overrides: a worker's environment may hold it though no file sets it.
const WorkerDefaultKey = config.Prefix + "_MAX_IN_FLIGHT"

// stopMargin is added to CLUSTERAPP_SHUTDOWN_TIMEOUT for TimeoutStopSec=.
const stopMargin = 10 * time.Second

// Settings is what the generator reads from the environment file.
type Settings struct {
	// Config holds the file's valid values; every invalid or unset
	// variable has its default.
	Config config.Config
	// Set holds the variables the file sets (to a non-empty value: KEY=
	// means the default), as systemd reads them.
	Set map[string]string
	// Notes name lines systemd skips and variables nobody reads: worth
	// fixing, harmless as they are.
	Notes []string
	// Problems name every invalid value and what it does: the units' own
	// settings fall back to their defaults, the listen address fails
	// closed, the workers refuse to start.
	Problems []string
	// ListenRefused, when not empty, says why clusterapp.socket must not
	// listen at all: the listen address is invalid, or the file cannot be
	// read as systemd would. It never falls back to another address.
	ListenRefused string
	// MetricsRefused is the same for clusterapp-metrics.socket
	// (CLUSTERAPP_METRICS_LISTEN).
	MetricsRefused string
	// Invalid holds the CLUSTERAPP_* variables whose value is invalid
	// (config's Problems), so a value written differently from its
	// effective form (1 for true, 65536 for 64KiB) is not taken for one.
	Invalid map[string]bool

	from func(key string) string // the file a variable came from, for notes
}

// Read parses and validates the environment files at paths, in order, the
// way systemd and the workers read them (package envfile; a later file's
// value wins, as with several EnvironmentFile= lines). A missing file is
// skipped; none at all means all defaults. Problems never make it fail: a
// line systemd skips is skipped, an invalid value of a setting systemd
// applies falls back to its default for that variable alone, and an invalid
// listen address (or a file systemd refuses as a whole) sets ListenRefused.
// Notes and Problems say which, naming the file each value came from.
func Read(paths ...string) Settings {
	defaults, _ := config.LoadVars(nil) // the defaults are valid (a test says so)
	s := Settings{Config: defaults, Set: map[string]string{}}
	vars, origin, found := map[string]string{}, map[string]string{}, false
	for _, path := range paths {
		data, err := envfile.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			s.refuse(fmt.Sprintf("%s cannot be read: %v", path, err))
			return s
		}
		file, err := envfile.Parse(data)
		if err != nil {
			s.refuse(fmt.Sprintf("%s: %v", path, err))
			return s
		}
		found = true
		for _, w := range file.Warnings {
			s.Notes = append(s.Notes, fmt.Sprintf("%s: %s", path, w))
		}
		for k, v := range file.Vars() {
			if prev, ok := origin[k]; ok && vars[k] != v {
				s.Notes = append(s.Notes, fmt.Sprintf("%s: %s=%q overrides %q from %s", path, k, v, vars[k], prev))
			}
			vars[k], origin[k] = v, path
		}
	}
	if !found {
		return s
	}
	from := func(key string) string {
		if p, ok := origin[key]; ok {
			return p
		}
		return paths[0]
	}
	s.from = from
	keys := make([]string, 0, len(vars))
	for k, v := range vars {
		keys = append(keys, k)
		if v != "" {
			s.Set[k] = v
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, u := range config.Unknown([]string{k}) {
			s.Notes = append(s.Notes, fmt.Sprintf("%s: %s", from(k), u))
		}
		if config.SetBySystemd(k) {
			s.Problems = append(s.Problems, fmt.Sprintf("%s: %s is set by systemd for each worker, and the file's value replaces systemd's: "+
				"the workers lose their sockets, READY=1, the watchdog, the shared tables or the journal; remove the line", from(k), k))
		}
	}
	for _, k := range keys {
		if p := config.EnvStringProblem(k, vars[k]); p != "" {
			s.Problems = append(s.Problems, fmt.Sprintf("%s: %s", from(k), p))
		}
	}
	if p := config.EnvSizeProblem(vars); p != "" {
		s.Problems = append(s.Problems, fmt.Sprintf("%s: %s", strings.Join(paths, ", "), p))
	}
	c, err := config.LoadVars(vars)
	s.Config = c
	var ce *config.Error
	if errors.As(err, &ce) {
		s.problems(from, ce)
	} else if err != nil {
		s.refuse(fmt.Sprintf("%s: %v", paths[0], err))
	}
	if v, ok := s.Set[config.GOMEMLIMIT]; ok && !config.GOMEMLIMITApplies(v) {
		s.Problems = append(s.Problems, fmt.Sprintf("%s: %s=%q: %s", from(config.GOMEMLIMIT), config.GOMEMLIMIT, v, config.GOMEMLIMITAdvice))
	}
	// vars, not Set: an empty GOMAXPROCS= is passed on, and ignored.
	if v, ok := vars[config.GOMAXPROCS]; ok && !config.GOMAXPROCSApplies(v) {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: %s=%q: %s", from(config.GOMAXPROCS), config.GOMAXPROCS, v, config.GOMAXPROCSAdvice))
	}
	if v, ok := s.Set[config.GOGC]; ok && !config.GOGCApplies(v) {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: %s=%q: the Go runtime ignores it and collects at its default, 100 (expected a whole number such as 200, or off)", from(config.GOGC), config.GOGC, v))
	}
	listenKey, metricsKey := config.Prefix+"_LISTEN", config.Prefix+"_METRICS_LISTEN"
	if l, err := config.ParseListen(c.Listen); err == nil && s.ListenRefused == "" {
		if err := l.CheckInterface(); err != nil {
			s.refuse(fmt.Sprintf("%s: %s=%s: %v", from(listenKey), listenKey, c.Listen, err))
		}
	}
	if l, err := config.ParseListen(c.MetricsListen); err == nil && s.MetricsRefused == "" {
		if err := l.CheckInterface(); err != nil {
			s.refuseMetrics(fmt.Sprintf("%s: %s=%s: %v", from(metricsKey), metricsKey, c.MetricsListen, err))
		}
	}
	return s
}

// problems says what each invalid variable does: the units' settings fall
// back to their defaults, the listen address fails closed, the workers
// refuse their own settings.
func (s *Settings) problems(from func(key string) string, ce *config.Error) {
	s.Invalid = map[string]bool{}
	for _, p := range ce.Problems {
		s.Invalid[p.Key] = true
		path := from(p.Key)
		switch p.Scope {
		case config.ScopeUnits:
			s.Problems = append(s.Problems, fmt.Sprintf("%s: %s; the units use the default, %s", path, p, defaultOf(p.Key)))
		case config.ScopeBoth:
			s.Problems = append(s.Problems, fmt.Sprintf("%s: %s; the units use the default, %s, and the workers refuse to start until it is fixed", path, p, defaultOf(p.Key)))
		case config.ScopeListen:
			if p.Key == config.Prefix+"_METRICS_LISTEN" {
				s.refuseMetrics(fmt.Sprintf("%s: %s", path, p))
				continue
			}
			s.refuse(fmt.Sprintf("%s: %s", path, p))
		default:
			s.Problems = append(s.Problems, fmt.Sprintf("%s: %s; the workers refuse to start until it is fixed", path, p))
		}
	}
}

func (s *Settings) refuse(reason string) {
	if s.ListenRefused == "" {
		s.ListenRefused = reason
	}
	s.Problems = append(s.Problems, reason+"; "+config.SocketUnit+" will not listen anywhere until it is fixed")
}

func (s *Settings) refuseMetrics(reason string) {
	if s.MetricsRefused == "" {
		s.MetricsRefused = reason
	}
	s.Problems = append(s.Problems, reason+"; "+config.MetricsSocketUnit+" will not listen anywhere until it is fixed (the workers serve without metrics)")
}

func defaultOf(key string) string {
	for _, v := range config.Vars() {
		if v.Key == key && v.Default != "" {
			return v.Default
		}
	}
	return "(none)"
}

// sets reports whether the file sets CLUSTERAPP_name.
func (s Settings) sets(name string) bool {
	_, ok := s.Set[config.Prefix+"_"+name]
	return ok
}

// Workers is the number of worker instances: CLUSTERAPP_WORKERS, or cpus when 0.
func (s Settings) Workers(cpus int) int {
	if s.Config.Workers > 0 {
		return s.Config.Workers
	}
	return max(cpus, 1)
}

// defaultSlots is the admission limit the generator gives each worker:
// its share of the cpus, at least 1.
func (s Settings) defaultSlots(cpus int) int {
	return max(1, cpus/s.Workers(cpus))
}

// ProcsNote warns when the files set a GOMAXPROCS the runtime applies but
// not above the admission slots each worker will have on cpus CPUs
// (config.ProcsAtMostSlots: spike protection then sheds nothing); "" when
// they do not.
func (s Settings) ProcsNote(cpus int) string {
	v, ok := s.Set[config.GOMAXPROCS]
	if !ok || !config.GOMAXPROCSApplies(v) || s.from == nil {
		return ""
	}
	procs, _ := strconv.Atoi(v) // whole, from 1 (GOMAXPROCSApplies)
	slots := s.Config.MaxInFlight
	switch {
	case !s.sets("MAX_IN_FLIGHT"):
		slots = s.defaultSlots(cpus)
	case slots == 0: // the worker's own default: GOMAXPROCS
		slots = procs
	}
	if procs > slots {
		return ""
	}
	return fmt.Sprintf("%s: %s", s.from(config.GOMAXPROCS), config.ProcsAtMostSlots(procs, slots))
}

// header starts every generated file.
const header = "Generated by clusterapp-generator from " + config.EnvFile + " (and " + config.ScaleFile + ", written by\n`clusterapp scale`); edit the first and run `systemctl daemon-reload`. `systemctl edit UNIT` overrides\nthese values."

// Files returns the drop-ins to write, by path relative to the output
// directory. Every value goes through package unitfile, which escapes it
// or refuses it; the error names what could not be written.
func (s Settings) Files(cpus int) (map[string]string, error) {
	c := s.Config
	files := map[string]*unitfile.File{}

	target := unitfile.New(header).Section("Unit")
	for i := 1; i <= s.Workers(cpus); i++ {
		target.Set("Wants", config.WorkerUnit(i))
	}
	files[config.TargetUnit+".d/50-workers.conf"] = target

	// The worker the socket starts comes up alone: on a cold start (boot,
	// the first connection, a start of the target) workers 2..N start
	// after clusterapp-first.target, which is ordered after worker 1, so
	// worker 1 does not share the CPUs with N-1 other hardened spawns
	// before it answers the connection that started it. Not an order on
	// worker 1 itself (Before=): systemd orders every pair of jobs, so a
	// worker 1 in a back-off, failing or hung before READY=1 held up every
	// other worker's restart, for good when it failed in a loop, and a
	// stop drained worker 1 only after the others. The target has a start
	// job only on a cold start (it stays active while workers 2..N run)
	// and a JobTimeoutSec= of a second; systemd/clusterapp-first.target
	// says how. Before 2026-12-04 each worker waited in an ExecStartPre=
	// (`clusterapp await-first`): its N-1 processes, and the start jobs
	// around them, cost worker 1's first 200 about 15 ms with 2 workers on
	// 2 CPUs and 130 ms with 8 (docs/benchmarks.md, "Worker 1 up first, by
	// a target").
	for i := 2; i <= s.Workers(cpus); i++ {
		files[config.WorkerUnit(i)+".d/50-first.conf"] = unitfile.New(header).Section("Unit").
			Set("Wants", config.FirstTarget).
			Set("After", config.FirstTarget)
	}

	switch {
	case s.ListenRefused != "":
		// Fail closed: with every ListenStream= reset, systemd refuses to
		// load the socket ("no Listen setting") rather than listen on the
		// shipped address, which may be wider than the operator meant.
		// The reason goes to the journal; the unit says where to look and
		// holds nothing of the operator's file.
		sock := unitfile.New(header).Comment(config.SocketUnit + " must not listen: CLUSTERAPP_LISTEN is invalid, or the file cannot be").
			Comment("read as systemd reads it. `clusterapp config --check " + config.EnvFile + "` says why.")
		files[config.SocketUnit+".d/50-env.conf"] = sock.Section("Socket").Set("ListenStream", "")
	case s.sets("LISTEN") || s.sets("BACKLOG"):
		sock := unitfile.New(header).Section("Socket")
		if s.sets("LISTEN") {
			l, err := config.ParseListen(c.Listen)
			if err != nil {
				return nil, fmt.Errorf("listen address: %w", err) // Read refuses these; never reached
			}
			sock.Set("ListenStream", "").Set("ListenStream", l.String())
		}
		files[config.SocketUnit+".d/50-env.conf"] = sock.Set("Backlog", strconv.Itoa(c.Backlog))
	}

	switch {
	case s.MetricsRefused != "":
		sock := unitfile.New(header).Comment(config.MetricsSocketUnit + " must not listen: CLUSTERAPP_METRICS_LISTEN is invalid.").
			Comment("`clusterapp config --check " + config.EnvFile + "` says why.")
		files[config.MetricsSocketUnit+".d/50-env.conf"] = sock.Section("Socket").Set("ListenStream", "")
	case s.sets("METRICS_LISTEN"):
		l, err := config.ParseListen(c.MetricsListen)
		if err != nil {
			return nil, fmt.Errorf("metrics listen address: %w", err) // Read refuses these; never reached
		}
		files[config.MetricsSocketUnit+".d/50-env.conf"] = unitfile.New(header).Section("Socket").Set("ListenStream", "").Set("ListenStream", l.String())
	}

	svc := unitfile.New(header).Section("Service")
	// One request per CPU for the pool as a whole: each worker's admission
	// limit is its share of the CPUs. A pool admitting more computations
	// than it has CPUs keeps every CPU busy, and its rejections then wait
	// for a CPU behind them (docs/benchmarks.md, "Spike: /fib?n=30 at 10x
	// its sustainable rate"). An Environment= line, so
	// CLUSTERAPP_MAX_IN_FLIGHT in the env file (EnvironmentFile=) still wins.
	svc.SetEnv(WorkerDefaultKey, strconv.Itoa(s.defaultSlots(cpus)))
	svc.Set("WatchdogSec", milliseconds(c.WatchdogSec))
	svc.Set("TimeoutStopSec", milliseconds(c.ShutdownTimeout+stopMargin))
	svc.Set("LimitNOFILE", strconv.Itoa(c.LimitNOFILE))
	svc.Set("MemoryHigh", orInfinity(c.MemoryHigh))
	svc.Set("MemoryMax", orInfinity(c.MemoryMax))
	// A GOMEMLIMIT the Go runtime cannot parse kills a worker before its
	// first instruction, every time, as fast as systemd restarts it
	// (config.GOMEMLIMIT): keep it out of the workers' environment.
	if v, ok := s.Set[config.GOMEMLIMIT]; ok && !config.GOMEMLIMITApplies(v) {
		svc.UnsetEnv(config.GOMEMLIMIT, v)
	}
	files[config.WorkerTemplate+".d/50-env.conf"] = svc

	out := map[string]string{}
	for rel, f := range files {
		text, err := f.String()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		out[rel] = text
	}
	return out, nil
}

// milliseconds writes d for a unit file. config bounds every duration the
// generator writes to an hour or so, far from overflowing.
func milliseconds(d time.Duration) string {
	return fmt.Sprintf("%dms", d.Milliseconds())
}

func orInfinity(s string) string {
	if s == "" {
		return "infinity"
	}
	return s
}

// Run is the generator's entry point: it reads envFile and writes the
// drop-ins into dir. What is wrong with the file is reported through warn
// (a problem) and note (a skipped line, an unknown variable), one line
// each, and never stops the generator; only a failure to write is an error.
func Run(envFile, dir string, cpus int, warn, note func(string)) error {
	s := Read(envFile, config.ScaleFileFor(envFile))
	for _, n := range s.Notes {
		note(n)
	}
	if n := s.ProcsNote(cpus); n != "" {
		note(n)
	}
	for _, p := range s.Problems {
		warn(p)
	}
	files, err := s.Files(cpus)
	if err != nil {
		return err
	}
	for rel, content := range files {
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}
