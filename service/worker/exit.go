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
)

// RecordExit counts how worker name's process ended in the pool's metrics
// table (clusterapp_worker_exits_total), and paces a loop of starts whose
// process never reached the worker. The worker unit runs it as
// ExecStopPost= (`clusterapp-worker exited --instance %i`), where systemd sets
// $SERVICE_RESULT (systemd.exec(5)): "watchdog" when the watchdog killed
// the worker, which the worker itself cannot record. routes are the
// service's, as the worker ran them: they place the table. The unit runs it
// with full privileges (ExecStopPost=+), so its exec skips the unit's
// sandbox set-up: the restart that follows is not held up by it, and it
// runs when that set-up is what fails. It only adds to the table the
// workers built; before any worker has built one there is nothing to count
// into.
//
// When this process ended before the worker's code ran
// (crashloop.Unreached), it counts its start (metrics.RecordStart: the
// process claimed no slot), and waits crashloop.UnreachedDelay before it
// returns, and so before systemd restarts the unit, and says so in the
// journal (MESSAGE_ID= logging.MsgUnreachedBackOff). SIGTERM, SIGINT or the
// end of ctx end the wait.
func RecordExit(ctx context.Context, name string, routes Routes, stderr io.Writer) error {
	result, dir := os.Getenv("SERVICE_RESULT"), readEnv().runtimeDir
	if result == "" || dir == "" {
		return fmt.Errorf("exited: SERVICE_RESULT=%q RUNTIME_DIRECTORY=%q: expected both, as systemd sets them for ExecStopPost=", result, dir)
	}
	var errs []error
	if err := metrics.RecordExit(dir, Labels(routes), name, result); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("exited: %w", err))
	}
	n, err := crashloop.NewUnreached(dir, name).Ended()
	if err != nil {
		errs = append(errs, fmt.Errorf("exited: %w", err))
	}
	if n > 0 {
		// The process never reached the worker, so it claimed no slot:
		// count its start here.
		if err := metrics.RecordStart(dir, Labels(routes), name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("exited: %w", err))
		}
	}
	paceUnreached(ctx, n, name, stderr)
	return errors.Join(errs...)
}

// paceUnreached waits when the end of worker name's process is the nth in
// a row of starts that did not reach the worker (crashloop.Unreached).
func paceUnreached(ctx context.Context, n int, name string, stderr io.Writer) {
	wait := crashloop.UnreachedDelay(n)
	if wait <= 0 {
		return
	}
	// Caught before the line that says it waits, as in slowCrashLoop.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigc)
	ended := fmt.Sprintf("code=%s, status=%s", os.Getenv("EXIT_CODE"), os.Getenv("EXIT_STATUS"))
	starts := "1 start"
	if n > 1 {
		starts = fmt.Sprintf("%d starts in a row", n)
	}
	configLog(name, stderr).WithFields(logging.Event(logging.MsgUnreachedBackOff)).
		WithField("starts", n).WithField("wait", wait).WithField("exit", ended).
		Warn(fmt.Sprintf("the process ended before the worker ran (%s), %s: systemd cannot set up the unit, or the Go runtime cannot start in it (the lines above say why); waiting %s before systemd restarts it", ended, starts, wait))
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-sigc:
	case <-ctx.Done():
	}
}
