package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/admission"
	"github.com/clusterapp/clusterapp/service/worker/balance"
	"github.com/clusterapp/clusterapp/service/worker/cache"
	"github.com/clusterapp/clusterapp/service/worker/internal/shm"
	"github.com/clusterapp/clusterapp/service/worker/logging"
	"github.com/clusterapp/clusterapp/service/worker/metrics"
	"github.com/clusterapp/clusterapp/service/worker/ratelimit"
	"github.com/sirupsen/logrus"
)

// protection is the spike-traffic machinery a worker is configured with:
// built once at start, before anything serves.
type protection struct {
	maxInFlight int
	procs       admission.Procs // GOMAXPROCS levels; govern applies them
	cfg         config.Config
	limiter     *ratelimit.Limiter // nil when there is no rate limit
	keeper      *ratelimit.Keeper  // nil when the limiter's table is this process's for good (standalone)
	// batch: requests admitted while the spare P runs compute on
	// SCHED_BATCH threads (admission.ProbeBatch passed); nil: they don't.
	batch *admission.Threads
	// refused: the probe was refused (a stricter SystemCallFilter=, say);
	// nil otherwise. Its warning waits until the switch would apply.
	refused *refusal
	// desiredNow, for a pool worker, reads the pool size the operator
	// configures now (the env and scale files, which `clusterapp scale`
	// rewrites); nil, or not ok: the configured pool as of this start.
	desiredNow func() (int, bool)
	log        *logrus.Entry
}

// refusal is why the SCHED_BATCH switch cannot run, warned about once: at
// start when the configured pool fits this process's CPUs, otherwise the
// first time the governor takes the spare P while the pool fits (workers
// pinned one per CPU, counted by the balance table). A pool of more
// workers than CPUs never switches, so there it is said once at start, as
// information: eight workers on two CPUs used to warn eight times for a
// switch none of them would make.
type refusal struct {
	err  error
	once sync.Once
	log  *logrus.Entry
}

func (r *refusal) warn() {
	r.once.Do(func() {
		r.log.WithError(r.err).Warn("computing requests run on ordinary threads while the spare P runs, so /healthz and rejections wait longer behind them: " +
			"the process may not set a thread's scheduling policy (the shipped unit's SystemCallFilter= allows sched_setattr)")
	})
}

// newProtection sizes admission control from plan (setProcs'), probes the
// SCHED_BATCH switch and, when a limit is set, puts the rate limiter on the shared table in the units' common RuntimeDirectory
// ($RUNTIME_DIRECTORY, /run/clusterapp). When that table cannot be opened,
// the limiter runs on CLUSTERAPP_RATE_LIMIT_FALLBACK (a table of its own, or
// none: limited routes answer 503) and a goroutine retries for the life of
// the process, until it opens. The table stays mapped until the process
// exits.
func newProtection(cfg config.Config, env env, plan procsPlan, log *logrus.Entry) protection {
	p := protection{cfg: cfg, maxInFlight: plan.maxInFlight, procs: plan.procs, log: log}
	// With a governor whose serving level has a P beyond the slots (the
	// spare P, which SetSpare reports); govern uses it while the pool has
	// no more workers than CPUs (fitsCPUs).
	if p.procs.Serving > p.procs.Base && p.procs.Serving > p.maxInFlight {
		p.probed(admission.ProbeBatch())
	}
	if cfg.RateLimit > 0 {
		p.limiter, p.keeper = newRateLimiter(cfg, env, log)
	}
	log.WithFields(logrus.Fields{
		"max_in_flight": p.maxInFlight, "gomaxprocs": p.procs.Base, "gomaxprocs_serving": p.procs.Serving, "admission_wait": cfg.AdmissionWait,
		"rate_limit": cfg.RateLimit, "rate_burst": cfg.RateBurst, "cache_entries": cfg.CacheEntries,
		"request_timeout": cfg.RequestTimeout, "rate_limit_table": p.tableMode(), "batch_computing_possible": p.batch != nil,
	}).Info("protection")
	return p
}

// procsPlan is the worker's Ps, planned from its admission slots.
type procsPlan struct {
	maxInFlight int // CLUSTERAPP_MAX_IN_FLIGHT, 0 replaced by Go's GOMAXPROCS
	procs       admission.Procs
}

// setProcs plans the worker's Ps from its admission slots and sets
// GOMAXPROCS to the plan's Base. The worker calls it first, once its
// configuration is read: changing GOMAXPROCS stops the world, and the stop
// hands the caches of the Ps it removes back to the heap's central lists,
// whose first blocks are fresh pages, page faults each. Under the worker
// unit's sandbox on this project's 2-CPU machine that took 0.9 ms as the
// start's first step and 1.4 ms after the rest of the set-up, whose
// allocations the second P had cached meanwhile (medians of 12 starts).
func setProcs(cfg config.Config, log *logrus.Entry) procsPlan {
	plan := procsPlan{maxInFlight: cfg.MaxInFlight}
	current := runtime.GOMAXPROCS(0)
	if plan.maxInFlight == 0 {
		plan.maxInFlight = current
	}
	plan.procs = admission.PlanProcs(current, plan.maxInFlight, operatorProcs(os.LookupEnv, log))
	if runtime.GOMAXPROCS(plan.procs.Base); plan.procs.Base != current {
		log.WithFields(logrus.Fields{"gomaxprocs": plan.procs.Base, "was": current, "max_in_flight": plan.maxInFlight}).
			Info("GOMAXPROCS lowered to the admission slots: more Ps than requests running at once only wake threads for nothing")
	}
	if plan.procs.TooFew {
		log.WithFields(logrus.Fields{"gomaxprocs": plan.procs.Base, "max_in_flight": plan.maxInFlight}).
			Warn(config.ProcsAtMostSlots(plan.procs.Base, plan.maxInFlight))
	}
	return plan
}

// operatorProcs reports whether the operator fixed GOMAXPROCS: set to a
// value the Go runtime applies. A value it ignores ("3n", "0", empty) is
// logged, naming it, and counts as unset, as it does for the runtime: the
// worker then plans its Ps from its slots and keeps the spare P's governor
// (config.GOMAXPROCS says what taking it for the operator's once cost).
func operatorProcs(lookup func(string) (string, bool), log *logrus.Entry) bool {
	v, set := lookup(config.GOMAXPROCS)
	if set && !config.GOMAXPROCSApplies(v) {
		log.WithFields(logrus.Fields{"variable": config.GOMAXPROCS, "value": v}).WithFields(logging.Event(logging.MsgInvalidConfig)).
			Warn(fmt.Sprintf("%s=%q: %s", config.GOMAXPROCS, v, config.GOMAXPROCSAdvice))
		return false
	}
	return set
}

// govern adds the serving path's spare P while long requests hold every
// admission slot and the serving path waits, and drops it after, until ctx
// ends (admission.Governor), telling lim and bal (nil: no balancing) whether the
// worker runs more Ps than slots; with the operator's GOMAXPROCS it does
// nothing.
func (p protection) govern(ctx context.Context, lim *admission.Limiter, bal *balance.Balancer) {
	g := &admission.Governor{Procs: p.procs, Slots: lim.Slots, Started: lim.Started(), Long: lim.Long(), WatchLong: lim.WatchLong, NoSpare: p.noSpare(bal), Changed: func(from, to int, why string) {
		spare := to > p.maxInFlight
		batch := p.batchWith(spare, bal)
		lim.SetSpare(batch) // admitted requests compute on SCHED_BATCH threads meanwhile
		if bal != nil {
			bal.SetSpare(spare)
		}
		p.log.WithFields(logrus.Fields{"gomaxprocs": to, "was": from, "batch_computing": batch}).Info("GOMAXPROCS: " + why)
	}}
	_ = g.Run(ctx) // returns ctx's error once the worker stops
}

// probed takes ProbeBatch's answer: the switch is possible, the operator's
// own policy stays, or it was refused (warned about now if the configured
// pool fits this process's CPUs, else when it first would apply).
func (p *protection) probed(t admission.Threads, err error) {
	switch {
	case errors.Is(err, admission.ErrOwnPolicy):
		p.log.WithError(err).Info("computing requests keep the threads' scheduling policy (CPUSchedulingPolicy=) while the spare P runs")
	case err != nil:
		p.refused = &refusal{err: err, log: p.log}
		if poolSize(p.cfg) <= runtime.NumCPU() {
			p.refused.warn()
			return
		}
		p.log.WithError(err).WithFields(logrus.Fields{"workers": poolSize(p.cfg), "cpus": runtime.NumCPU()}).
			Info("a thread's scheduling policy may not be set, which matters only while the pool has no more workers than CPUs: warned then, if ever")
	default:
		p.batch = &t
	}
}

// batchWith reports whether requests admitted while the spare P runs
// compute on SCHED_BATCH threads, now that the governor has taken it
// (spare) or dropped it: only while the pool fits its CPUs. A refused
// switch that would apply is warned about (once).
func (p protection) batchWith(spare bool, bal *balance.Balancer) bool {
	if !spare || (p.batch == nil && p.refused == nil) || !p.fitsCPUs(bal) {
		return false
	}
	if p.batch == nil {
		p.refused.warn()
		return false
	}
	return true
}

// fitsCPUs reports whether the pool runs no more workers than CPUs now,
// for the SCHED_BATCH switch: past that (8 workers on 2 CPUs) the switch
// made the computing workers trade the CPUs more often, for 3% less
// /fib?n=30 and a higher p99 (docs/benchmarks.md, "The serving thread
// waited for the kernel"). With the balance table, the pool is its live
// workers, or the configured pool when that is larger (while the pool
// starts or grows, the workers still starting are not live yet: worker 3
// of 3 on 2 CPUs, taking the spare P before worker 2 was, saw 2 workers
// fit), on the CPUs the live workers may run on together
// (balance.Balancer.Pool), so workers pinned one per CPU fit, though each
// sees one CPU; without it, or with a worker's CPUs unknown, the
// configured pool and this process's CPUs.
func (p protection) fitsCPUs(bal *balance.Balancer) bool {
	workers, cpus := p.poolOnCPUs(bal)
	return workers <= cpus
}

// poolOnCPUs is the pool and the CPUs it runs on, as fitsCPUs counts them.
func (p protection) poolOnCPUs(bal *balance.Balancer) (workers, cpus int) {
	if bal != nil {
		if workers, cpus := bal.Pool(); cpus > 0 {
			return max(workers, p.desired()), cpus
		}
	}
	return poolSize(p.cfg), runtime.NumCPU()
}

// noSpare is the Governor's NoSpare: no spare P while the pool runs more
// workers than CPUs (fitsCPUs). There each CPU already has more than one
// worker to run, and the spare P's thread only competes with them: with it,
// 4 and 8 workers on 2 CPUs served an allocating route (/slow) 1.2-1.5x
// slower and turned up to 22 requests away in 3 s where they turned none
// away without (a stop of the world for the garbage collector waits for every
// P's thread, and with two threads a process that the kernel runs on a
// shared CPU waits for the other to be scheduled; docs/benchmarks.md,
// "The spare P past one worker per CPU"). The answer is logged when it
// changes.
func (p protection) noSpare(bal *balance.Balancer) func() string {
	last := ""
	return func() string {
		why := ""
		if workers, cpus := p.poolOnCPUs(bal); workers > cpus {
			why = fmt.Sprintf("%d workers on %d CPUs: no spare P past one worker per CPU", workers, cpus)
		}
		if why != last {
			msg := "GOMAXPROCS: the spare P is allowed again: the pool fits its CPUs"
			if why != "" {
				msg = "GOMAXPROCS stays at the admission slots: " + why
			}
			p.log.WithField("gomaxprocs_serving", p.procs.Serving).Info(msg)
			last = why
		}
		return why
	}
}

// desired is the pool's configured size: as the operator configures it
// now for a pool worker, else as this worker started with.
func (p protection) desired() int {
	if p.desiredNow != nil {
		if n, ok := p.desiredNow(); ok {
			return n
		}
	}
	return poolSize(p.cfg)
}

// apply sets the protection fields of o, observed by m, and returns the
// tools it builds for the routes (the cache).
func (p protection) apply(o *StackOptions, m *metrics.Metrics, bal *balance.Balancer) Tools {
	var obs admission.Observer = m
	if bal != nil {
		obs = admissionObservers{m, bal} // the balancer publishes slot pressure to the pool
	}
	var changed func()
	if bal != nil {
		changed = bal.SlotsChanged // a worker with every slot taken leaves the socket's wait to a free one
	}
	o.Admission = admission.New(admission.Options{
		MaxInFlight: p.maxInFlight, Wait: p.cfg.AdmissionWait, RetryAfter: time.Second,
		Exempt: Unprotected, Observer: obs, SlotsChanged: changed,
		Batch: p.batch, BatchFailed: func(err error) {
			p.log.WithError(err).Warn("computing requests run on ordinary threads from now on: a thread's scheduling policy could not be switched")
		},
	})
	if bal != nil {
		bal.WatchSlots(p.maxInFlight, o.Admission.InFlight, runtime.GOMAXPROCS(0) > p.maxInFlight)
	}
	o.StuckAfter = stuckAfter(p.cfg)
	if p.limiter != nil {
		trusted, _ := config.ParsePrefixes(p.cfg.TrustedProxies) // validated by config.Load
		exempt := map[string]bool{}
		for _, path := range Unprotected {
			exempt[path] = true
		}
		o.RateLimit = &ratelimit.Guard{
			Limiter: p.limiter, Trusted: trusted, Exempt: exempt, Observer: m,
			IPv4Prefix: p.cfg.RateLimitIPv4Prefix, IPv6Prefix: p.cfg.RateLimitIPv6Prefix,
		}
		m.WatchRateLimitTable(p.tableMode)
	}
	var t Tools
	if p.cfg.CacheEntries > 0 {
		t.Cache = cache.New(p.cfg.CacheEntries, int64(p.cfg.CacheBytes), m)
	}
	return t
}

// newRateLimiter returns the limiter on the shared table, or on the
// operator's fallback while that cannot be opened (keeper retries it).
// Without a RUNTIME_DIRECTORY (a standalone worker) its table is the
// process's own for good, and keeper is nil.
func newRateLimiter(cfg config.Config, env env, log *logrus.Entry) (*ratelimit.Limiter, *ratelimit.Keeper) {
	clock, err := shm.MonotonicClock()
	if err != nil {
		log.WithError(err).Warn("rate limit: CLOCK_MONOTONIC unreadable; this worker's times are on its own scale, bounded by the burst in the shared table")
	}
	l := ratelimit.NewLimiter(nil, cfg.RateLimit, cfg.RateBurst, clock)
	dir := env.runtimeDir
	if dir == "" {
		l.SetTable(ratelimit.NewLocal(cfg.RateLimitSlots))
		log.Warn("no RUNTIME_DIRECTORY: the rate limit applies to this process only, not to the whole service")
		return l, nil
	}
	fallback := ratelimit.ModeLocal
	if cfg.RateLimitFallback == config.RateLimitClosed {
		fallback = ratelimit.ModeClosed
	}
	k := ratelimit.Keep(l, ratelimit.KeepOptions{
		Open:     func() (*ratelimit.Table, error) { return ratelimit.OpenShared(dir, cfg.RateLimitSlots, log) },
		Fallback: fallback, Slots: cfg.RateLimitSlots, Log: log,
	})
	// For the life of the process: there is no context to end it, and it
	// returns as soon as the shared table opens (at once when it did).
	go k.Run(context.Background())
	return l, k
}

// tableMode names the table the rate limit is on: shared, local or closed
// ("" without a rate limit).
func (p protection) tableMode() string {
	switch {
	case p.keeper != nil:
		return string(p.keeper.Mode())
	case p.limiter != nil:
		return string(ratelimit.ModeLocal)
	}
	return ""
}

// stuckGrace is what stuckAfter allows a request cut at its deadline to
// return (a computation notices its cancelled context within milliseconds).
const stuckGrace = 2 * time.Second

// stuckAfter is how long a request may hold its admission slot while it can
// still be answered: the write deadline net/http sets from the end of the
// headers (CLUSTERAPP_WRITE_TIMEOUT), or the computing routes' deadline
// (CLUSTERAPP_REQUEST_TIMEOUT) when longer, since those run until it even
// past the write deadline; plus stuckGrace. 0 when CLUSTERAPP_WRITE_TIMEOUT
// is 0: nothing then bounds a request that is not computing, so holding a
// slot long proves nothing.
func stuckAfter(cfg config.Config) time.Duration {
	if cfg.WriteTimeout <= 0 {
		return 0
	}
	return max(cfg.WriteTimeout, cfg.RequestTimeout) + stuckGrace
}

// admissionObservers tells each of its observers.
type admissionObservers []admission.Observer

func (o admissionObservers) Admitted(waited time.Duration) {
	for _, x := range o {
		x.Admitted(waited)
	}
}

func (o admissionObservers) Shed() {
	for _, x := range o {
		x.Shed()
	}
}
