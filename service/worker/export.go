package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/listen"
	"github.com/clusterapp/clusterapp/service/worker/logging"
	"github.com/clusterapp/clusterapp/service/worker/metrics"
	"github.com/sirupsen/logrus"
)

// ExporterField names the metrics exporter on its log lines, where a
// worker's carry logging.WorkerKey.
const ExporterField = "exporter"

// ExportOptions are what a program gives Export: the same Routes and Version
// as its workers, so that it reads the table they write.
type ExportOptions struct {
	Version string
	Routes  Routes
	Stderr  io.Writer // where the log goes; os.Stderr when nil
}

// Export serves the pool's metrics on the metrics socket systemd passes
// (clusterapp-metrics.service) until SIGTERM or SIGINT or ctx ends, then
// lets the scrapes in progress finish (scrapeGrace). It reads the pool's
// table from the units' runtime directory (metrics.Exporter), and holds no
// service socket: a socket unit starts no service on a connection while a
// unit it passes its descriptor to runs, so with the exporter holding it, a
// connection to a stopped pool would wait in the backlog for good.
//
// Of the settings it uses only the log's: a problem with another is the
// workers' to refuse, and is only noted here. Without LISTEN_FDS it refuses
// to run: a standalone worker (serve) answers its own scrapes on
// CLUSTERAPP_METRICS_LISTEN.
func Export(ctx context.Context, opts ExportOptions) error {
	if opts.Routes == nil {
		return errors.New("worker: ExportOptions.Routes is required")
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	cfg, err := config.Load()
	var ce *config.Error
	if err != nil && !errors.As(err, &ce) {
		return err
	}
	logger := logging.New(logging.Options{Format: string(cfg.LogFormat), Level: logrus.Level(cfg.LogLevel), Journal: logging.UnderJournal(), Out: opts.Stderr})
	log := logger.WithField(ExporterField, "metrics")
	if ce != nil {
		log.Warn(ce.Error() + "; the metrics exporter reads only CLUSTERAPP_LOG_FORMAT and CLUSTERAPP_LOG_LEVEL (their defaults when invalid): the others are the workers' to refuse or ignore")
	}
	env := readEnv()
	if !env.socketActivated {
		return errors.New("metrics: systemd passed no sockets (LISTEN_FDS is not set): this command serves " + config.MetricsSocketUnit + " for " + config.MetricsServiceUnit + "; a worker run on its own (serve) answers scrapes itself, on CLUSTERAPP_METRICS_LISTEN")
	}
	set, err := listen.Passed(log)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer set.Close()
	if len(set.Metrics) == 0 || len(set.Service) > 0 {
		return fmt.Errorf("metrics: systemd passed LISTEN_FDNAMES=%q: expected only the metrics socket (%q, from %s)", os.Getenv("LISTEN_FDNAMES"), listen.MetricsName, config.MetricsSocketUnit)
	}
	dir := env.runtimeDir
	if dir == "" {
		dir = config.RuntimeDir // the units' RuntimeDirectory=, when systemd did not say
	}
	exp := metrics.NewExporter(metrics.ExporterOptions{
		Dir: dir, Routes: Labels(opts.Routes), Version: opts.Version,
		DesiredNow: func() (int, bool) { return exporterPoolSize(config.EnvFile) }, Log: log,
	})
	defer func() { _ = exp.Close() }() // the process exits next
	srv := scrapeServer(exp, log)

	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigc)
	errc := make(chan error, len(set.Metrics))
	for _, l := range set.Metrics {
		go func() {
			if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics listener %s: %w", l.Addr(), err)
			}
		}()
	}
	log.WithField("listen", addrs(set.Metrics)).WithField("table_dir", dir).Info("serving the pool's metrics")
	select {
	case err = <-errc:
	case sig := <-sigc:
		log.WithField("signal", sig.String()).Info("stopping")
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), scrapeGrace)
	defer cancel()
	_ = srv.Shutdown(sctx) // past the grace period a scrape is cut: it is not client traffic
	return err
}

// scrapeServer serves GET /metrics from h on a metrics listener, and JSON
// errors for anything else (scrapeHandler).
func scrapeServer(h http.Handler, log *logrus.Entry) *http.Server {
	return &http.Server{
		Handler: scrapeHandler(h), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
		// TLS-less HTTP errors (a malformed scrape) are worth a warning line.
		ErrorLog: stdlogTo(log.WithField("listener", "metrics")),
	}
}
