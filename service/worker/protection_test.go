package worker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/admission"
	"github.com/clusterapp/clusterapp/service/worker/balance"
	"github.com/clusterapp/clusterapp/service/worker/logging"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// A GOMAXPROCS the Go runtime applies is the operator's; one it ignores
// counts as unset, with a warning naming it and what is expected.
func TestOperatorProcs(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		operator bool
		warning  string
	}{
		{env: map[string]string{}, operator: false},
		{env: map[string]string{"GOMAXPROCS": "3"}, operator: true},
		{env: map[string]string{"GOMAXPROCS": "3n"}, operator: false, warning: `GOMAXPROCS="3n": expected a whole number from 1`},
		{env: map[string]string{"GOMAXPROCS": ""}, operator: false, warning: `GOMAXPROCS="": expected a whole number from 1`},
		{env: map[string]string{"GOMAXPROCS": "0"}, operator: false, warning: `GOMAXPROCS="0"`},
	} {
		var out bytes.Buffer
		log := logrus.New()
		log.SetOutput(&out)
		log.SetFormatter(&logrus.TextFormatter{DisableQuote: true})
		lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
		if got := operatorProcs(lookup, logrus.NewEntry(log)); got != tc.operator {
			t.Errorf("%v: operator's GOMAXPROCS = %v, want %v", tc.env, got, tc.operator)
		}
		if tc.warning == "" {
			if out.Len() != 0 {
				t.Errorf("%v: logged %q", tc.env, out.String())
			}
			continue
		}
		for _, want := range []string{"level=warning", tc.warning, "variable=" + config.GOMAXPROCS, logging.MsgInvalidConfig} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: the warning %q lacks %q", tc.env, out.String(), want)
			}
		}
	}
}

// Requests compute on SCHED_BATCH threads (package admission, batch.go)
// only where a governor adds the spare P and the pool has no more workers
// than CPUs: past that, the switch made the computing workers trade the
// CPUs more often.
func TestBatchComputingOnlyUpToOneWorkerPerCPU(t *testing.T) {
	if _, set := os.LookupEnv(config.GOMAXPROCS); set {
		t.Skip("GOMAXPROCS is set in the test's environment: the worker would keep it and run no governor")
	}
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs) // setProcs sets the process's GOMAXPROCS
	cpus := runtime.NumCPU()
	for _, tc := range []struct {
		workers, slots int
		want           bool
	}{
		{workers: 1, slots: 1, want: true},
		{workers: cpus, slots: 1, want: true},
		{workers: cpus + 1, slots: 1, want: false},
		{workers: 1, slots: cpus + 1, want: false}, // more slots than Ps: no spare P to serve with
	} {
		runtime.GOMAXPROCS(procs)
		var out bytes.Buffer
		log := logrus.New()
		log.SetOutput(&out)
		cfg, entry := config.Config{Workers: tc.workers, MaxInFlight: tc.slots}, logrus.NewEntry(log)
		p := newProtection(cfg, env{}, setProcs(cfg, entry), entry)
		if got := p.batch != nil && p.fitsCPUs(nil); got != tc.want {
			t.Errorf("%d workers on %d CPUs, %d slots (Ps %d, serving %d): batch computing %v, want %v; log:\n%s",
				tc.workers, cpus, tc.slots, p.procs.Base, p.procs.Serving, got, tc.want, out.String())
		}
	}
}

// With the pool's balance table, "no more workers than CPUs" counts the
// live workers and the CPUs they may run on together: workers pinned one
// per CPU fit, though each sees one CPU (runtime.NumCPU); a worker more on
// one of those CPUs does not; a worker whose CPUs are unknown leaves the
// configured pool and this process's CPUs to decide.
func TestBatchComputingCountsThePoolsCPUs(t *testing.T) {
	dir := t.TempDir()
	log := logrus.NewEntry(logrus.New())
	join := func(self int, cpus uint64) *balance.Balancer {
		t.Helper()
		b, _, err := balance.Open(dir, balance.Options{Self: self, Primaries: 1, CPUs: cpus}, log)
		if err != nil {
			t.Fatal(err)
		}
		b.Beat()
		return b
	}
	// One worker per CPU of a pool larger than this process's CPU count,
	// so that only the table can say it fits.
	n := runtime.NumCPU() + 1
	if n > 63 {
		t.Skipf("%d CPUs: the table's CPU sets hold CPUs 0-63", n-1)
	}
	p := protection{cfg: config.Config{Workers: n}}
	var last *balance.Balancer
	for i := range n {
		last = join(i, 1<<i)
	}
	if workers, cpus := last.Pool(); !p.fitsCPUs(last) {
		t.Errorf("%d workers pinned one per CPU (Pool: %d workers, %d CPUs): do not fit, want them to", n, workers, cpus)
	}
	extra := join(n, 0b01)
	if workers, cpus := extra.Pool(); p.fitsCPUs(extra) {
		t.Errorf("a worker more on CPU 0 (Pool: %d workers, %d CPUs): fits, want %d workers on %d CPUs not to", workers, cpus, n+1, n)
	}
	extra.Leave()

	// While the pool starts or grows, its workers still starting are not
	// live yet: the configured pool counts too, as the operator configures
	// it now (the scale file) when the worker can read it.
	growing := protection{cfg: config.Config{Workers: n + 1}}
	if workers, cpus := last.Pool(); growing.fitsCPUs(last) {
		t.Errorf("%d of %d configured workers live, one per CPU (Pool: %d workers, %d CPUs): fits, want the %d configured not to", n, n+1, workers, cpus, n+1)
	}
	growing.desiredNow = func() (int, bool) { return n, true } // scaled down since it started
	if !growing.fitsCPUs(last) {
		t.Errorf("the pool scaled down to its %d live workers, one per CPU: does not fit, want it to", n)
	}
	growing.desiredNow = func() (int, bool) { return 0, false } // the files unreadable: as it started
	if growing.fitsCPUs(last) {
		t.Errorf("the pool size unreadable now: fits, want the %d workers of the start not to", n+1)
	}

	unknown := join(n, 0)
	if p.fitsCPUs(unknown) {
		t.Errorf("with a worker of unknown CPUs: fits, want the configured %d workers on this process's %d CPUs to decide (they do not fit)", n, runtime.NumCPU())
	}
}

// A switch to SCHED_BATCH that the unit refuses is warned about once, and
// only where it would have applied: at start for a pool that fits this
// process's CPUs; for a larger one (eight workers on two CPUs) an
// information line at start, and the warning only if the governor later
// takes the spare P while the balance table shows the pool fitting (workers
// pinned one per CPU).
func TestRefusedSwitchWarnsOnceWhereItWouldApply(t *testing.T) {
	refused := errors.New("sched_setattr(SCHED_BATCH): operation not permitted")
	lines := func(hook *logtest.Hook, level logrus.Level) int {
		n := 0
		for _, e := range hook.AllEntries() {
			if e.Level == level && e.Data[logrus.ErrorKey] == refused {
				n++
			}
		}
		return n
	}
	newP := func(workers int) (*protection, *logtest.Hook) {
		logger, hook := logtest.NewNullLogger()
		logger.SetLevel(logrus.DebugLevel)
		return &protection{cfg: config.Config{Workers: workers}, log: logrus.NewEntry(logger)}, hook
	}

	fits, hook := newP(1)
	fits.probed(admission.Threads{}, refused)
	if w := lines(hook, logrus.WarnLevel); w != 1 {
		t.Fatalf("one worker: %d warnings at start, want 1", w)
	}
	if fits.batchWith(true, nil) || lines(hook, logrus.WarnLevel) != 1 {
		t.Fatalf("one worker, spare P: computes on SCHED_BATCH or warns again (%d warnings)", lines(hook, logrus.WarnLevel))
	}

	n := runtime.NumCPU() + 1
	if n > 63 {
		t.Skipf("%d CPUs: the table's CPU sets hold CPUs 0-63", n-1)
	}
	over, hook := newP(n)
	over.probed(admission.Threads{}, refused)
	if w, i := lines(hook, logrus.WarnLevel), lines(hook, logrus.InfoLevel); w != 0 || i != 1 {
		t.Fatalf("%d workers on %d CPUs: %d warnings and %d information lines at start, want 0 and 1", n, n-1, w, i)
	}
	if over.batchWith(true, nil) || lines(hook, logrus.WarnLevel) != 0 {
		t.Fatalf("%d workers on %d CPUs, spare P: computes on SCHED_BATCH or warns", n, n-1)
	}
	dir := t.TempDir()
	var last *balance.Balancer
	for i := range n { // pinned one per CPU: the table says the pool fits
		b, _, err := balance.Open(dir, balance.Options{Self: i, Primaries: 1, CPUs: 1 << i}, over.log)
		if err != nil {
			t.Fatal(err)
		}
		b.Beat()
		last = b
	}
	if over.batchWith(false, last) || lines(hook, logrus.WarnLevel) != 0 {
		t.Fatal("the spare P dropped: computes on SCHED_BATCH or warns")
	}
	for range 3 {
		if over.batchWith(true, last) {
			t.Fatal("pinned pool, spare P, switch refused: computes on SCHED_BATCH")
		}
	}
	if w := lines(hook, logrus.WarnLevel); w != 1 {
		t.Fatalf("pinned pool, spare P taken 3 times: %d warnings, want 1", w)
	}

	ok, _ := newP(n)
	ok.probed(admission.Threads{}, nil)
	if !ok.batchWith(true, last) || ok.batchWith(false, last) || ok.batchWith(true, nil) {
		t.Fatal("a switch that is allowed: want it only with the spare P and a pool that fits")
	}
}

// The governor's NoSpare refuses the spare P while the pool runs more
// workers than CPUs, with the numbers, and the worker's journal says so
// once, and again once the pool fits.
func TestNoSparePastOneWorkerPerCPU(t *testing.T) {
	cpus := runtime.NumCPU()
	var out bytes.Buffer
	l := logrus.New()
	l.SetOutput(&out)
	p := protection{cfg: config.Config{Workers: cpus + 1}, procs: admission.Procs{Base: 1, Serving: 2}, log: logrus.NewEntry(l)}
	if cpus > 63 {
		t.Skipf("%d CPUs: the table's CPU sets hold CPUs 0-63", cpus)
	}
	// The pool as a worker sees it: the live workers in the balance table
	// (this one, on every CPU) and the configured size, read at each ask.
	bal, _, err := balance.Open(t.TempDir(), balance.Options{Self: 0, Primaries: 1, CPUs: 1<<cpus - 1}, logrus.NewEntry(l))
	if err != nil {
		t.Fatal(err)
	}
	bal.Beat()
	size := cpus + 1
	p.desiredNow = func() (int, bool) { return size, true }
	noSpare := p.noSpare(bal)
	want := fmt.Sprintf("%d workers on %d CPUs: no spare P past one worker per CPU", cpus+1, cpus)
	for range 3 {
		if why := noSpare(); why != want {
			t.Fatalf("%d workers on %d CPUs: NoSpare says %q, want %q", cpus+1, cpus, why, want)
		}
	}
	if n := strings.Count(out.String(), "GOMAXPROCS stays at the admission slots: "+want); n != 1 {
		t.Fatalf("the refusal logged %d times in 3 asks, want once; log:\n%s", n, out.String())
	}
	size = cpus // `clusterapp scale` down to one worker per CPU
	if why := noSpare(); why != "" {
		t.Fatalf("%d workers on %d CPUs: NoSpare says %q, want the spare P allowed", cpus, cpus, why)
	}
	if !strings.Contains(out.String(), "the spare P is allowed again") {
		t.Fatalf("no line saying the spare P is allowed again; log:\n%s", out.String())
	}
	out.Reset()
	fits := protection{cfg: config.Config{Workers: cpus}, procs: admission.Procs{Base: 1, Serving: 2}, log: logrus.NewEntry(l)}
	if why := fits.noSpare(nil)(); why != "" || out.Len() != 0 {
		t.Fatalf("%d workers on %d CPUs: NoSpare says %q and logged %q, want nothing", cpus, cpus, why, out.String())
	}
}
