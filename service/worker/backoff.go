package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/crashloop"
	"github.com/clusterapp/clusterapp/service/worker/logging"
	"github.com/clusterapp/clusterapp/service/worker/metrics"
	"github.com/clusterapp/clusterapp/service/worker/notify"
	"github.com/sirupsen/logrus"
)

// configFailures is the count of configuration failures in a row of worker
// name, when it runs under systemd with a RuntimeDirectory (package
// crashloop).
func configFailures(env env, name string) (crashloop.Counter, bool) {
	if env.runtimeDir == "" {
		return crashloop.Counter{}, false
	}
	return crashloop.New(env.runtimeDir, name), true
}

// arrived removes the mark of a start that has not reached the worker yet
// (crashloop.Unreached), under the units.
func (e env) arrived(name string) error {
	if e.runtimeDir == "" {
		return nil
	}
	return crashloop.NewUnreached(e.runtimeDir, name).Arrived()
}

// countStart counts this process's start in the pool's metrics table when
// it will not serve (a configuration it refuses), so it claims no slot and
// is not counted there as a start (metrics.RecordStart). Nothing to count
// into before any worker has built the table.
func (e env) countStart(opts Options, log *logrus.Entry) {
	if e.runtimeDir == "" {
		return
	}
	if err := metrics.RecordStart(e.runtimeDir, Labels(opts.Routes), opts.Name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.WithError(err).Warn("start not counted in the metrics table: " + err.Error())
	}
}

// configLog is a worker's logger while its configuration is invalid, so
// CLUSTERAPP_LOG_FORMAT and _LEVEL cannot be trusted: each line reads
// "clusterapp: " and the message, as before the configuration is known, and
// under journald carries WORKER= and its other fields as journal fields.
func configLog(name string, stderr io.Writer) *logrus.Entry {
	l := logging.New(logging.Options{Format: logging.FormatPlain, Level: logrus.InfoLevel, Journal: logging.UnderJournal(), Out: stderr})
	return l.WithField(logging.WorkerKey, name)
}

// slowCrashLoop waits before a worker with a bad configuration exits, longer
// at each failure in a row, and says why in STATUS= and the journal
// (MESSAGE_ID= logging.MsgBackOff). SIGTERM or SIGINT end the wait.
func slowCrashLoop(ctx context.Context, env env, name string, cause error, stderr io.Writer) {
	counter, ok := configFailures(env, name)
	if !ok {
		return
	}
	// Catch SIGTERM before anything says the worker is waiting: a stop that follows the
	// STATUS= or the journal line must end the wait, not kill the process with the default
	// action.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigc)
	log := configLog(name, stderr)
	n, err := counter.Fail()
	if err != nil {
		log.WithError(err).Warn("configuration failures not counted: " + err.Error())
	}
	wait := crashloop.Delay(n)
	log.WithFields(logging.Event(logging.MsgBackOff)).WithField("failures", n).WithField("wait", wait).
		Warn(fmt.Sprintf("bad configuration, failure %d in a row; exiting in %s, then systemd restarts the worker", n, wait))
	backOff(ctx, log, fmt.Sprintf("bad configuration, failure %d in a row; exiting in %s, then systemd restarts the worker: %v", n, wait, cause), wait, sigc)
}

// backOff says status in STATUS= and waits, until the wait is over (true)
// or a signal on sigc or the end of ctx cuts it short (false). The caller
// has caught the signals before it logged that it waits.
func backOff(ctx context.Context, log *logrus.Entry, status string, wait time.Duration, sigc <-chan os.Signal) bool {
	notifier := notify.New(log)
	_ = notifier.Status(status)
	_ = notifier.Close() // the status is sent; nothing else is reported during the wait
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-sigc:
	case <-ctx.Done():
	}
	return false
}

// startBackOff counts this start among the worker's unclean starts in a row
// (package crashloop) and, from the second on, waits before the worker
// serves: a worker that keeps dying soon after it starts is restarted at
// once by systemd (RestartSec=0) but serves, crashes and logs at most at
// the pace of crashloop.StartDelay. It says why in STATUS= and the journal
// (MESSAGE_ID= logging.MsgRestartBackOff). It returns false when a signal or ctx
// ended the wait: the worker then exits without serving. Standalone (no
// RuntimeDirectory) it never waits. The returned reset clears the count;
// the caller calls it on a clean exit, after crashloop.StableAfter of
// serving, and when a stop ended the wait.
func startBackOff(ctx context.Context, env env, name string, log *logrus.Entry, sigc <-chan os.Signal) (serve bool, reset func()) {
	if env.runtimeDir == "" {
		return true, func() {}
	}
	counter := crashloop.NewStarts(env.runtimeDir, name)
	reset = func() {
		if err := counter.Reset(); err != nil {
			log.WithError(err).Warn("unclean starts not cleared")
		}
	}
	n, err := counter.Fail()
	if err != nil {
		log.WithError(err).Warn("unclean starts not counted: " + err.Error())
	}
	wait := crashloop.StartDelay(n)
	if wait <= 0 {
		return true, reset
	}
	msg := fmt.Sprintf("started %d times in a row without running %s or stopping cleanly; waiting %s before serving", n, crashloop.StableAfter, wait)
	log.WithFields(logging.Event(logging.MsgRestartBackOff)).WithField("starts", n).WithField("wait", wait).Warn(msg)
	return backOff(ctx, log, msg, wait, sigc), reset
}
