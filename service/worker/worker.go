package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/admission"
	"github.com/clusterapp/clusterapp/service/worker/balance"
	"github.com/clusterapp/clusterapp/service/worker/crashloop"
	"github.com/clusterapp/clusterapp/service/worker/internal/memlimit"
	"github.com/clusterapp/clusterapp/service/worker/listen"
	"github.com/clusterapp/clusterapp/service/worker/logging"
	"github.com/clusterapp/clusterapp/service/worker/metrics"
	"github.com/clusterapp/clusterapp/service/worker/notify"
	"github.com/clusterapp/clusterapp/service/worker/server"
	"github.com/clusterapp/clusterapp/service/worker/status"
	"github.com/clusterapp/clusterapp/service/worker/watchdog"
	"github.com/sirupsen/logrus"
)

// Options are what a program gives Run. The settings are not here: Run
// reads the CLUSTERAPP_* environment (package config), as the units pass
// it from /etc/clusterapp/clusterapp.env.
type Options struct {
	// Name is the worker's name: X-Worker, logs, metrics. The units pass
	// their instance (`--instance %i`); a number from 1 to
	// config.MaxWorkers shares the pool's tables (balancing, metrics,
	// crash-loop counts). DefaultName when empty.
	Name string
	// Version is logged at start and exported as clusterapp_build_info.
	Version string
	// Routes builds the service's routes (required).
	Routes Routes
	// Stderr receives the logs (os.Stderr when nil): the journal under
	// systemd.
	Stderr io.Writer
}

// DefaultName names a worker started without a name: pid-N.
func DefaultName() string { return fmt.Sprintf("pid-%d", os.Getpid()) }

// ErrCrashed ends Run through /debug/crash.
var ErrCrashed = errors.New("crashed on request (/debug/crash)")

// ConfigError is an invalid configuration the worker refuses to start with.
// A program exits 78 (EX_CONFIG) on it, which the worker unit's
// RestartPreventExitStatus= does not prevent: the worker has already waited
// its back-off. Logged says the reason is already in the logs.
type ConfigError struct {
	Err    error
	Logged bool
}

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// statusEvery is how often the STATUS= line shown by systemctl status is
// refreshed (only changes are sent).
const statusEvery = time.Second

// scrapeGrace bounds how long a draining worker finishes a scrape in
// progress; Prometheus retries at the next interval on another worker.
const scrapeGrace = 2 * time.Second

// Run runs one worker until SIGTERM or SIGINT, recycling, /debug/crash or a
// listener's failure, and returns once it has drained: nil after a clean
// drain, *ConfigError for an invalid configuration, ErrCrashed, or the
// error that stopped it. A second signal during the drain cuts it short.
//
// It serves on the sockets systemd passes (LISTEN_FDS), or binds
// CLUSTERAPP_LISTEN itself without systemd; sends READY=1 once a health
// probe through the whole handler stack answers; pings the watchdog only
// while probes answer; reports STATUS=; and, under the units (a
// RUNTIME_DIRECTORY shared by the workers), balances connections, shares
// the rate limit and metrics tables, and slows a crash loop down.
func Run(ctx context.Context, opts Options) error {
	if opts.Routes == nil {
		return errors.New("worker: Options.Routes is required")
	}
	if opts.Name == "" {
		opts.Name = DefaultName()
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	env := readEnv()
	// First: this process reached the worker's code, which `clusterapp
	// exited` (ExecStopPost=) tells from a start that died before it.
	arrived := env.arrived(opts.Name)
	cfg, err := config.Load()
	refused, ignored, err := env.problems(err)
	if err != nil {
		return err
	}
	if refused != nil {
		// Said at once, then the back-off wait: an operator reading the
		// journal must not wait up to 30 s for the reason.
		configLog(opts.Name, opts.Stderr).WithFields(logging.Event(logging.MsgInvalidConfig)).Error(refused.Error())
		env.countStart(opts, configLog(opts.Name, opts.Stderr))
		slowCrashLoop(ctx, env, opts.Name, refused, opts.Stderr)
		return &ConfigError{Err: refused, Logged: true}
	}
	logger := logging.New(logging.Options{Format: string(cfg.LogFormat), Level: logrus.Level(cfg.LogLevel), Journal: logging.UnderJournal(), Out: opts.Stderr})
	log := logger.WithField(logging.WorkerKey, opts.Name)
	if unknown := config.Unknown(config.EnvironKeys()); len(unknown) > 0 {
		log.Warn(strings.Join(unknown, "; "))
	}
	if arrived != nil {
		log.WithError(arrived).Warn(arrived.Error())
	}
	for _, p := range ignored {
		log.WithField("variable", p.Key).WithFields(logging.Event(logging.MsgInvalidConfig)).Warn(p.String() + "; systemd applies this setting, not the worker, so the worker serves on (clusterapp-generator used the default)")
	}
	procs := setProcs(cfg, log) // first: the sooner, the cheaper (setProcs)

	// Signals are caught before anything starts, so a SIGTERM that arrives
	// while starting still drains instead of killing the process.
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigc)
	serve, resetStarts := startBackOff(ctx, env, opts.Name, log, sigc)
	if !serve {
		// A stop or restart is the operator stepping in: the next start
		// is a first one, as after a clean exit.
		resetStarts()
		log.Info("stopped during the restart back-off; exiting without serving")
		return nil
	}

	setMemoryLimit(cfg, log)
	checkMonitor(os.Getenv("GODEBUG"), env.socketActivated, log)
	// Valid here: an invalid address stops a standalone worker above, and
	// a socket-activated one holds the default instead.
	addr, err := config.ParseListen(cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen address: %w", err)
	}
	// Valid too, for the same reasons; "" binds none.
	metricsAddr := ""
	if ma, err := config.ParseListen(cfg.MetricsListen); err == nil {
		metricsAddr = ma.GoAddr()
	}
	set, source, err := listen.All(addr.GoAddr(), metricsAddr, log)
	if err != nil {
		return err
	}
	// Under systemd a worker is passed no metrics socket: the metrics
	// exporter (clusterapp-metrics.service, Export) answers scrapes.
	// The shared tables (rate limit, balance) stay mapped until the process
	// exits: after a drain cut short by a second signal, handlers and
	// connection hooks may still be running, and a write to an unmapped
	// table is a SIGSEGV, not an error.
	prot := newProtection(cfg, env, procs, log)
	if n, err := strconv.Atoi(opts.Name); err == nil && n >= 1 { // a pool worker, not a standalone process
		prot.desiredNow = func() (int, bool) { return configuredPoolSize(config.EnvFile) }
	}
	bal := newBalancer(cfg, env, opts.Name, log)
	w := newWorker(cfg, env, opts, log, prot, bal)
	defer func() { _ = w.notifier.Close() }() // the process exits next; nothing to report
	w.stable = resetStarts
	err = w.run(ctx, set, source, sigc)
	if err == nil {
		resetStarts() // a clean exit (drained): the next start is a first one
	}
	return err
}

// env is what the worker reads of its environment besides the CLUSTERAPP_*
// settings, read once: whether systemd passes the sockets, and the runtime
// directory the units share between workers.
type env struct {
	// socketActivated: systemd passes the listening sockets (LISTEN_FDS),
	// so CLUSTERAPP_LISTEN is systemd's setting, not the worker's.
	socketActivated bool
	// runtimeDir is the units' common RuntimeDirectory ($RUNTIME_DIRECTORY,
	// /run/clusterapp) that holds the pool's shared tables; "" for a
	// standalone worker, which then keeps every table to itself.
	runtimeDir string
}

func readEnv() env {
	return env{socketActivated: os.Getenv("LISTEN_FDS") != "", runtimeDir: os.Getenv("RUNTIME_DIRECTORY")}
}

// problems splits invalid settings into those this worker refuses to start
// with (its own, and the listen address when it must bind it itself) and
// those it ignores (settings systemd applies through the generator, and the
// listen address when systemd passes the socket). Any other error is
// returned as it is.
func (e env) problems(err error) (refused *config.Error, ignored []config.Problem, other error) {
	var ce *config.Error
	if !errors.As(err, &ce) {
		return nil, nil, err
	}
	scopes := []config.Scope{config.ScopeWorker, config.ScopeBoth}
	if !e.socketActivated {
		scopes = append(scopes, config.ScopeListen)
	}
	refused = ce.Only(scopes...)
	for _, p := range ce.Problems {
		if refused == nil || !slices.Contains(refused.Problems, p) {
			ignored = append(ignored, p)
		}
	}
	return refused, ignored, nil
}

// setMemoryLimit applies GOMEMLIMIT derived from the cgroup and from
// CLUSTERAPP_MAX_RSS, unless set.
func setMemoryLimit(cfg config.Config, log *logrus.Entry) {
	recycleAt := cfg.MaxRSSBytes(config.PhysicalMemory())
	limit, ok, err := memlimit.Derive(os.Getenv, cfg.MemoryLimitRatio, int64(min(recycleAt, math.MaxInt64)))
	if err != nil {
		log.WithError(err).Warn("cannot read the cgroup memory limit; GOMEMLIMIT derived from CLUSTERAPP_MAX_RSS alone, if set")
	}
	if ok {
		debug.SetMemoryLimit(limit)
		log.WithField("gomemlimit_bytes", limit).Info("Go memory limit derived from the cgroup memory limit and CLUSTERAPP_MAX_RSS, the lower")
	}
	if advice := config.MaxRSSAdvice(cfg.MaxRSS, cfg.MemoryMax, config.PhysicalMemory()); advice != "" {
		log.Warn(advice)
	}
}

type worker struct {
	cfg      config.Config
	env      env
	name     string
	version  string
	log      *logrus.Entry
	notifier *notify.Notifier
	srv      *server.Server
	crashc   chan struct{}
	detached chan string       // a shared table lost its file name (tables.go)
	overRSS  chan string       // resident memory over CLUSTERAPP_MAX_RSS (rss.go)
	bal      *balance.Balancer // nil when balancing is off
	stopBal  func()            // stops the heartbeat and returns once this worker has left the table
	metrics  *metrics.Metrics
	scrapes  *http.Server // serves the metrics listener
	// admission is the request limiter; its slots drive GOMAXPROCS.
	admission *admission.Limiter
	prot      protection
	stable    func() // clears the unclean-starts count once the worker has served crashloop.StableAfter
	// drainReason is why the worker drains (a signal, recycling), set
	// before the server starts draining, for /readyz's answer.
	drainReason atomic.Pointer[string]
}

// poolSize is the number of workers the pool runs: CLUSTERAPP_WORKERS, 0
// meaning one per CPU (the generator's rule).
func poolSize(cfg config.Config) int {
	if cfg.Workers == 0 {
		return runtime.NumCPU()
	}
	return cfg.Workers
}

func newWorker(cfg config.Config, env env, opts Options, log *logrus.Entry, prot protection, bal *balance.Balancer) *worker {
	w := &worker{
		cfg: cfg, env: env, name: opts.Name, version: opts.Version, log: log, notifier: notify.New(log),
		crashc: make(chan struct{}, 1), detached: make(chan string, 1), overRSS: make(chan string, 1), bal: bal, stopBal: func() {}, prot: prot,
	}
	m := metrics.New(metrics.Options{
		Worker: opts.Name, Version: opts.Version, Routes: Labels(opts.Routes), Dir: env.runtimeDir,
		Desired: poolSize(cfg), DesiredNow: prot.desiredNow, Start: time.Now(), Log: log,
	})
	w.metrics = m
	w.scrapes = metricsServer(m, log)
	so := StackOptions{
		Name: opts.Name, Header: cfg.WorkerHeader, Metrics: m, Log: log,
		MaxBodyBytes: int64(cfg.MaxBodyBytes), AccessLog: cfg.AccessLog, DebugEndpoints: cfg.DebugEndpoints,
		RequestTimeout: cfg.RequestTimeout,
		NotReady:       w.notReady,
		Crash: func() {
			w.crashc <- struct{}{}
			select {} // Run returns and the program exits; this request is never answered
		},
	}
	tools := prot.apply(&so, m, bal)
	tools.Name, tools.Config, tools.Log = opts.Name, cfg, log
	so.Routes = opts.Routes(tools)
	w.admission = so.Admission
	sopts := server.Options{
		ReadHeaderTimeout: cfg.ReadHeaderTimeout, ReadTimeout: cfg.ReadTimeout,
		WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout,
		MaxHeaderBytes: int(cfg.MaxHeaderBytes), ShutdownTimeout: cfg.ShutdownTimeout,
		DrainIdleGrace: cfg.DrainIdleGrace, MaxRequests: cfg.MaxRequests,
		MaxRequestsJitter: cfg.MaxRequestsJitter, KeepAliveRequests: cfg.KeepAliveRequests,
		KeepAliveTime: cfg.KeepAliveTime,
		ConnObservers: []server.ConnObserver{m}, Log: log,
	}
	if bal != nil {
		sopts.ConnObservers = append(sopts.ConnObservers, bal)
		sopts.WrapListener = func(l net.Listener) net.Listener { return bal.Listener(l, m) }
		sopts.Rebalance = func() bool {
			if !bal.Crowded() {
				return false
			}
			m.ConnMoved()
			return true
		}
		m.WatchBalanceGate(bal.Gating)
	}
	w.srv = server.New(sopts, NewStack(so))
	return w
}

func (w *worker) run(ctx context.Context, set listen.Set, source listen.Source, sigc <-chan os.Signal) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	listeners := set.Service
	errc := make(chan error, len(listeners)+len(set.Metrics))
	w.srv.Serve(listeners, errc)
	// Let the serving goroutines run before the rest of the start-up. With
	// GOMAXPROCS lowered to the admission slots (often 1), they first ran
	// when this goroutine blocked, after READY=1 and the "serving" line, so
	// the connection whose arrival started a socket-activated worker waited
	// in the backlog 2-5 ms longer than it had to. Serving before READY=1 is
	// not new (/readyz says "starting" meanwhile), only sooner. A hint, not
	// a barrier: the scheduler takes this goroutine back first now and then
	// (from its global queue, every 61st turn), and the start is as before.
	runtime.Gosched()
	w.metrics.WatchListeners(listeners)
	go w.metrics.Run(ctx)
	for _, l := range set.Metrics {
		go func() {
			if err := w.scrapes.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics listener %s: %w", l.Addr(), err)
			}
		}()
	}

	// READY=1 only once the handler stack has answered a probe.
	if err := w.srv.Probe(ctx); err != nil {
		return fmt.Errorf("first health probe: %w", err)
	}
	w.srv.SetReady()
	w.metrics.SetReady(true)
	// The governor starts once the worker is ready, so the start-up's own
	// work is not taken for requests holding the serving path up.
	go w.prot.govern(ctx, w.admission, w.bal)
	if w.bal != nil {
		bctx, cancel := context.WithCancel(ctx)
		left := make(chan struct{})
		go func() { defer close(left); w.bal.Run(bctx) }()
		w.stopBal = func() { cancel(); <-left }
	}
	w.startWatchdog(ctx)
	_ = w.notifier.Ready(w.status()) // failures are logged by the notifier
	if w.stable != nil {
		stable := time.AfterFunc(crashloop.StableAfter, w.stable)
		defer stable.Stop()
	}
	if counter, ok := configFailures(w.env, w.name); ok {
		if err := counter.Reset(); err != nil {
			w.log.WithError(err).Warn("configuration failures not cleared")
		}
	}
	go w.reportStatus(ctx)
	if w.env.socketActivated && w.env.runtimeDir != "" {
		go watchTables(ctx, w.sharedTables(), tablesCheckEvery, staggerFor(w.name), w.log, w.detached)
	}
	if limit, derived := w.memoryWatched(); limit > 0 || derived {
		go rssWatch{
			limit: limit, setting: w.cfg.MaxRSS, every: rssCheckEvery, settle: rssSettle,
			stagger: staggerFor(w.name), read: readMemory, relax: relaxHeapLimit(w.cfg, w.log), now: time.Now, log: w.log,
		}.run(ctx, time.Now(), w.overRSS)
	}
	w.log.WithFields(logrus.Fields{
		"addresses": addrs(listeners), "source": source, "pid": os.Getpid(), "version": w.version,
		"gomaxprocs": runtime.GOMAXPROCS(0), "recycle_after": w.srv.RecycleLimit(), "balance": w.bal != nil,
	}).WithFields(logging.Event(logging.MsgReady)).Info("serving")

	var reason string
	select {
	case sig := <-sigc:
		reason = "signal " + sig.String()
	case <-w.srv.Recycle():
		reason = "request limit reached"
		w.metrics.Recycled("requests")
		w.log.WithFields(logging.Event(logging.MsgRecycled)).WithField("recycle_after", w.srv.RecycleLimit()).Info("request limit reached; recycling")
	case why := <-w.detached:
		reason = "shared table file gone: " + why
		w.metrics.Recycled("tables")
	case why := <-w.overRSS:
		reason = why
		w.metrics.Recycled("memory")
	case <-w.crashc:
		return ErrCrashed
	case err := <-errc:
		return err
	}
	return w.drain(ctx, reason, sigc)
}

// notReady is /readyz's answer while the server takes no new work
// (StackOptions.NotReady): starting until the first health probe has
// passed, then draining, with the reason the drain began.
func (w *worker) notReady() (state, why string) {
	switch {
	case w.srv.Ready():
		return "", ""
	case !w.srv.Stats().Draining:
		return "starting", "this worker has not yet passed its first health probe"
	}
	reason := "stopping"
	if r := w.drainReason.Load(); r != nil {
		reason = *r
	}
	return "draining", "this worker is shutting down (" + reason + "): it finishes the requests it holds and takes no new work"
}

// drain stops the worker cleanly; a second signal aborts it.
func (w *worker) drain(ctx context.Context, reason string, sigc <-chan os.Signal) error {
	w.drainReason.Store(&reason) // before the server drains: /readyz names it
	w.log.WithField("reason", reason).WithField("timeout", w.cfg.ShutdownTimeout).WithFields(logging.Event(logging.MsgDraining)).Info("draining")
	_ = w.notifier.Stopping("draining: " + reason)
	w.stopBal() // the other workers stop leaving connections to this one
	w.metrics.SetReady(false)
	// Scrapes go to the other workers from now on; one in progress ends.
	sctx, scancel := context.WithTimeout(ctx, scrapeGrace)
	_ = w.scrapes.Shutdown(sctx) // past the grace period the scrape is cut: it is not client traffic
	scancel()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case sig := <-sigc:
			w.log.WithField("signal", sig.String()).Warn("second signal; exiting at once")
			cancel()
		case <-dctx.Done():
		}
	}()
	start := time.Now()
	if err := w.srv.Drain(dctx); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	st := w.srv.Stats()
	w.log.WithField("served", st.Served).WithField("took", time.Since(start).Round(time.Millisecond)).WithFields(logging.Event(logging.MsgDrained)).Info("drained; exiting")
	return nil
}

func (w *worker) startWatchdog(ctx context.Context) {
	timeout, err := notify.WatchdogInterval()
	if err != nil {
		w.log.WithError(err).Warn("watchdog settings unreadable; not pinging")
	}
	if timeout <= 0 {
		return
	}
	interval, deadline := watchdog.Every(timeout)
	w.metrics.WatchProbes(timeout)
	ping := func() error {
		w.metrics.ProbePassed() // the heartbeat a scrape judges this worker by
		return w.notifier.Watchdog()
	}
	p := &watchdog.Pinger{Interval: interval, Timeout: deadline, Probe: w.srv.Probe, Ping: ping, Log: w.log}
	w.log.WithField("watchdog_timeout", timeout).WithField("probe_every", interval).Info("health-gated watchdog on")
	go p.Run(ctx)
}

func (w *worker) reportStatus(ctx context.Context) {
	t := time.NewTicker(statusEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = w.notifier.Status(w.status())
		}
	}
}

// status is the line systemctl status shows (package status).
func (w *worker) status() string {
	st := w.srv.Stats()
	inFlight := w.metrics.InFlight()
	l := status.Load{
		Served: int64(st.Served), InFlight: inFlight, Connections: int64(st.Connections),
		// The server counts every request in the stack: those in a route,
		// those waiting for an admission slot, and those being refused.
		Queued: max(st.InFlight-inFlight, 0),
	}
	if st.Draining {
		return status.Draining(l)
	}
	return status.Serving(l)
}

// metricsServer serves GET /metrics (the whole pool's numbers) on the
// metrics listener of a worker run on its own (under systemd, the metrics
// exporter answers scrapes: Export).
func metricsServer(m *metrics.Metrics, log *logrus.Entry) *http.Server {
	return scrapeServer(m.Handler(), log)
}

// stdlogTo writes a standard library logger's lines as warnings on log.
func stdlogTo(log *logrus.Entry) *stdlog.Logger {
	return stdlog.New(log.WriterLevel(logrus.WarnLevel), "", 0)
}

func addrs(ls []net.Listener) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = l.Addr().String()
	}
	return strings.Join(s, ",")
}
