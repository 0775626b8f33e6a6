package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/clusterapp/clusterapp/service/admission"
	"github.com/clusterapp/clusterapp/service/app"
	"github.com/clusterapp/clusterapp/service/balance"
	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/crashloop"
	"github.com/clusterapp/clusterapp/service/listen"
	"github.com/clusterapp/clusterapp/service/logging"
	"github.com/clusterapp/clusterapp/service/memlimit"
	"github.com/clusterapp/clusterapp/service/metrics"
	"github.com/clusterapp/clusterapp/service/notify"
	"github.com/clusterapp/clusterapp/service/server"
	"github.com/clusterapp/clusterapp/service/watchdog"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
)

// statusEvery is how often the STATUS= line shown by systemctl status is
// refreshed (only changes are sent).
const statusEvery = time.Second

// errCrashed ends the process through /debug/crash.
var errCrashed = errors.New("crashed on request (/debug/crash)")

// runServe runs one worker until SIGTERM/SIGINT or recycling, then drains.
func runServe(ctx context.Context, instance string, stderr io.Writer) error {
	cfg, err := config.Load()
	refused, ignored, err := workerProblems(err)
	if err != nil {
		return err
	}
	if refused != nil {
		// Said at once, then the back-off wait: an operator reading the
		// journal must not wait up to 30 s for the reason.
		configLog(instance, stderr).WithFields(logging.Event(logging.MsgInvalidConfig)).Error(refused.Error())
		slowCrashLoop(ctx, instance, refused, stderr)
		return configError{err: refused, logged: true}
	}
	logger := logging.New(logging.Options{Format: string(cfg.LogFormat), Level: logrus.Level(cfg.LogLevel), Journal: logging.UnderJournal(), Out: stderr})
	log := logger.WithField("worker", instance)
	if unknown := config.Unknown(environKeys()); len(unknown) > 0 {
		log.Warn(strings.Join(unknown, "; "))
	}
	for _, p := range ignored {
		log.WithField("variable", p.Key).WithFields(logging.Event(logging.MsgInvalidConfig)).Warn(p.String() + "; systemd applies this setting, not the worker, so the worker serves on (clusterapp-generator used the default)")
	}

	// Signals are caught before anything starts, so a SIGTERM that arrives
	// while starting still drains instead of killing the process.
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigc)
	serve, resetStarts := startBackOff(ctx, instance, log, sigc)
	if !serve {
		// A stop or restart is the operator stepping in: the next start
		// is a first one, as after a clean exit.
		resetStarts()
		log.Info("stopped during the restart back-off; exiting without serving")
		return nil
	}

	setMemoryLimit(cfg, log)
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
	if len(set.Metrics) == 0 {
		log.Warn("systemd passed no metrics socket (is clusterapp-metrics.socket listening? see CLUSTERAPP_METRICS_LISTEN): this worker answers no scrape, its numbers still reach the others' scrapes")
	}
	// The shared tables (rate limit, balance) stay mapped until the process
	// exits: after a drain cut short by a second signal, handlers and
	// connection hooks may still be running, and a write to an unmapped
	// table is a SIGSEGV, not an error.
	prot, err := newProtection(cfg, log)
	if err != nil {
		return err
	}
	bal, err := newBalancer(cfg, instance, log)
	if err != nil {
		return err
	}
	w := newWorker(cfg, instance, log, prot, bal)
	w.govern = func(ctx context.Context) { prot.govern(ctx, w.admission, log) }
	defer func() { _ = w.notifier.Close() }() // the process exits next; nothing to report
	w.stable = resetStarts
	err = w.run(ctx, set, source, sigc)
	if err == nil {
		resetStarts() // a clean exit (drained): the next start is a first one
	}
	return err
}

// newServeCommand is serve's command line: the worker's name, which the
// unit passes from its instance (--instance %i); pid-<PID> without it.
func newServeCommand(stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a worker (the default command)",
		Long: `Run one worker: serve HTTP on the listening sockets systemd passes (LISTEN_FDS),
or bind CLUSTERAPP_LISTEN itself without systemd. It notifies READY=1 once a health
probe through the handler stack succeeds, pings the watchdog while probes answer,
and drains without losing a request on SIGTERM.

Settings are CLUSTERAPP_* environment variables, not flags: see 'clusterapp config'.
An invalid setting the worker applies exits 78 (EX_CONFIG) with one line saying why.`,
		Example: `  clusterapp serve --instance 1              # as clusterapp-worker@1.service runs it
  CLUSTERAPP_LISTEN=127.0.0.1:9000 clusterapp # standalone, without systemd`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef(cmd, "unexpected argument %q: settings are CLUSTERAPP_* environment variables", args[0])
			}
			return nil
		},
	}
	instance := cmd.Flags().String("instance", "", "the worker's `name`: X-Worker, logs, metrics; a number from 1 to 1024 takes part in balancing (default: pid-N, N the process ID)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !cmd.Flags().Changed("instance") {
			*instance = defaultInstance()
		}
		if !config.ValidInstance(*instance) {
			return usageError{msg: fmt.Sprintf("serve --instance %q: expected letters, digits, '.', '_', '-' or '@', at most 64 of them", *instance)}
		}
		return runServe(cmd.Context(), *instance, stderr)
	}
	return cmd
}

// defaultInstance names a worker started without --instance.
func defaultInstance() string { return fmt.Sprintf("pid-%d", os.Getpid()) }

// workerProblems splits invalid settings into those this worker refuses to
// start with (its own, and the listen address when it must bind it itself)
// and those it ignores (settings systemd applies through the generator, and
// the listen address when systemd passes the socket). Any other error is
// returned as it is.
func workerProblems(err error) (refused *config.Error, ignored []config.Problem, other error) {
	var ce *config.Error
	if !errors.As(err, &ce) {
		return nil, nil, err
	}
	scopes := []config.Scope{config.ScopeWorker, config.ScopeBoth}
	if os.Getenv("LISTEN_FDS") == "" {
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

// setMemoryLimit applies GOMEMLIMIT derived from the cgroup, unless set.
func setMemoryLimit(cfg config.Config, log *logrus.Entry) {
	limit, ok, err := memlimit.Derive(os.Getenv, cfg.MemoryLimitRatio)
	if err != nil {
		log.WithError(err).Warn("cannot read the cgroup memory limit; GOMEMLIMIT not derived")
	}
	if ok {
		debug.SetMemoryLimit(limit)
		log.WithField("gomemlimit_bytes", limit).Info("Go memory limit derived from the cgroup memory limit")
	}
}

type worker struct {
	cfg      config.Config
	instance string
	log      *logrus.Entry
	notifier *notify.Notifier
	srv      *server.Server
	crashc   chan struct{}
	bal      *balance.Balancer // nil when balancing is off
	stopBal  func()            // stops the heartbeat and returns once this worker has left the table
	metrics  *metrics.Metrics
	scrapes  *http.Server // serves the metrics listener
	// admission is the request limiter; its slots drive GOMAXPROCS.
	admission *admission.Limiter
	// govern adjusts GOMAXPROCS until its context ends; it starts once the
	// worker is ready, so the start-up's own work is not taken for requests
	// holding the serving path up.
	govern func(context.Context)
	stable func() // clears the unclean-starts count once the worker has served crashloop.StableAfter
}

// poolSize is the number of workers the pool runs: CLUSTERAPP_WORKERS, 0
// meaning one per CPU (the generator's rule).
func poolSize(cfg config.Config) int {
	if cfg.Workers == 0 {
		return runtime.NumCPU()
	}
	return cfg.Workers
}

func newWorker(cfg config.Config, instance string, log *logrus.Entry, prot protection, bal *balance.Balancer) *worker {
	w := &worker{cfg: cfg, instance: instance, log: log, notifier: notify.New(log), crashc: make(chan struct{}, 1), bal: bal, stopBal: func() {}}
	m := metrics.New(metrics.Options{
		Worker: instance, Version: version, Routes: app.Routes, Dir: os.Getenv("RUNTIME_DIRECTORY"),
		Desired: poolSize(cfg), Start: time.Now(), Log: log,
	})
	w.metrics = m
	w.scrapes = metricsServer(m, log)
	opts := app.Options{
		Instance: instance, FibMaxN: cfg.FibMaxN, MaxBodyBytes: int64(cfg.MaxBodyBytes),
		AccessLog: cfg.AccessLog, DebugEndpoints: cfg.DebugEndpoints,
		Ready: func() bool { return w.srv.Ready() },
		Crash: func() {
			w.crashc <- struct{}{}
			select {} // main exits the process; this request is never answered
		},
		Metrics: m, Log: log,
		RequestTimeout: cfg.RequestTimeout, CacheMaxAge: cfg.CacheMaxAge,
	}
	prot.apply(&opts, m)
	w.admission = opts.Admission
	a := app.New(opts)
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
		m.WatchBalanceGate(bal.Gating)
	}
	w.srv = server.New(sopts, a.Handler())
	return w
}

func (w *worker) run(ctx context.Context, set listen.Set, source listen.Source, sigc <-chan os.Signal) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	listeners := set.Service
	errc := make(chan error, len(listeners)+len(set.Metrics))
	w.srv.Serve(listeners, errc)
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
	if w.govern != nil {
		go w.govern(ctx)
	}
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
	if counter, ok := configFailures(w.instance); ok {
		if err := counter.Reset(); err != nil {
			w.log.WithError(err).Warn("configuration failures not cleared")
		}
	}
	go w.reportStatus(ctx)
	w.log.WithFields(logrus.Fields{
		"addresses": addrs(listeners), "source": source, "pid": os.Getpid(), "version": version,
		"gomaxprocs": runtime.GOMAXPROCS(0), "recycle_after": w.srv.RecycleLimit(), "balance": w.bal != nil,
	}).WithFields(logging.Event(logging.MsgReady)).Info("serving")

	var reason string
	select {
	case sig := <-sigc:
		reason = "signal " + sig.String()
	case <-w.srv.Recycle():
		reason = "request limit reached"
		w.log.WithFields(logging.Event(logging.MsgRecycled)).WithField("recycle_after", w.srv.RecycleLimit()).Info("request limit reached; recycling")
	case <-w.crashc:
		return errCrashed
	case err := <-errc:
		return err
	}
	return w.drain(ctx, reason, sigc)
}

// drain stops the worker cleanly; a second signal aborts it.
func (w *worker) drain(ctx context.Context, reason string, sigc <-chan os.Signal) error {
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
	p := &watchdog.Pinger{Interval: interval, Timeout: deadline, Probe: w.srv.Probe, Ping: w.notifier.Watchdog, Log: w.log}
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

// status is the line systemctl status shows.
func (w *worker) status() string {
	st := w.srv.Stats()
	state := "serving"
	if st.Draining {
		state = "draining"
	}
	return fmt.Sprintf("%s: %d requests served, %d in flight, %d connections open", state, st.Served, st.InFlight, st.Connections)
}

// scrapeGrace bounds how long a draining worker finishes a scrape in
// progress; Prometheus retries at the next interval on another worker.
const scrapeGrace = 2 * time.Second

// metricsServer serves GET /metrics (the whole pool's numbers) on the
// metrics listener, and 404 for anything else.
func metricsServer(m *metrics.Metrics, log *logrus.Entry) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return &http.Server{
		Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
		// TLS-less HTTP errors (a malformed scrape) are worth a warning line.
		ErrorLog: stdlog.New(log.WithField("listener", "metrics").WriterLevel(logrus.WarnLevel), "", 0),
	}
}

func addrs(ls []net.Listener) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = l.Addr().String()
	}
	return strings.Join(s, ",")
}
