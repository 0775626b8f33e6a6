// Command clusterapp-hello is a service of its own on clusterapp's worker
// runtime (package worker): the shipped units run it in place of the seed
// service with one drop-in, and it gets the suite's socket activation,
// health-gated READY=1 and watchdog, lossless drain, balancing, metrics and
// crash-loop pacing without a line of its own (docs/own-handler.md).
//
//	clusterapp-hello [serve] [--instance N]   run one worker (the unit's ExecStart=)
//	clusterapp-hello exited --instance N      count how worker N ended (ExecStopPost=)
//
// Its routes: GET /hello?name=X answers {"greeting":"hello, X","worker":"N"}
// (name defaults to "world"); GET /work?ms=N sleeps N milliseconds (0 to
// 10000) under CLUSTERAPP_REQUEST_TIMEOUT's deadline, answering 503 when the
// deadline comes first. Settings are the worker's CLUSTERAPP_* environment
// variables, as the units pass them from /etc/clusterapp/clusterapp.env.
//
// Exit status: 0 after a clean drain, 78 (EX_CONFIG) for an invalid setting,
// 1 for any other failure, 2 for a bad command line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

// name is the program's name in messages and the worker's logs.
const name = "clusterapp-hello"

// Exit statuses, so the units and scripts can tell failures apart.
const (
	exitFailure = 1
	exitUsage   = 2
	// exitConfig is EX_CONFIG from sysexits.h: the configuration is invalid
	// and restarting will not help until it is fixed.
	exitConfig = 78
)

// Bounds of the routes' parameters.
const (
	maxNameRunes = 64
	maxWorkMs    = 10_000
)

// usageError is a bad command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	os.Exit(exitCode(run(context.Background(), os.Args[1:], os.Stderr), os.Stderr))
}

// exitCode reports err on one line of stderr (unless the worker already
// logged it) and maps it to the exit status.
func exitCode(err error, stderr io.Writer) int {
	var ce *worker.ConfigError
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\nRun '%s -h' for usage.\n", name, err, name)
		return exitUsage
	case errors.As(err, &ce):
		if !ce.Logged {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
		}
		return exitConfig
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return exitFailure
}

// run parses the command line and runs the command it names: serve (the
// default) or exited.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	command := "serve"
	if len(args) > 0 && (args[0] == "serve" || args[0] == "exited") {
		command, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet(name+" "+command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [serve] [--instance N]   run one worker\n       %s exited --instance N      count how worker N ended (ExecStopPost=)\n", name, name)
		fs.PrintDefaults()
	}
	instance := fs.String("instance", "", "the worker's `name` (the unit's %i): X-Worker, logs, metrics; 1 to 1024 shares the pool's tables (default pid-N)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q: settings are CLUSTERAPP_* environment variables", fs.Arg(0))}
	}
	if *instance != "" && !config.ValidInstance(*instance) {
		return usageError{fmt.Sprintf("--instance %q: expected letters, digits, '.', '_', '-' or '@', at most 64 of them", *instance)}
	}
	if command == "exited" {
		if *instance == "" {
			return usageError{"exited: --instance is required (the worker unit's ExecStopPost= passes %i)"}
		}
		return worker.RecordExit(ctx, *instance, routes, stderr)
	}
	return worker.Run(ctx, worker.Options{Name: *instance, Version: version, Routes: routes, Stderr: stderr})
}

// routes are the service's routes (worker.Routes): the same paths in the
// same order whatever the tools, as the shared metrics table requires.
func routes(t worker.Tools) []worker.Route {
	s := service{worker: t.Name, requestTimeout: t.Config.RequestTimeout}
	return []worker.Route{
		{Path: "/hello", Handler: s.hello},
		{Path: "/work", Handler: s.work, Computes: true},
	}
}

// service is what the routes keep of the worker's tools.
type service struct {
	worker         string        // the worker's name, echoed in the greeting
	requestTimeout time.Duration // named in the 503 of a /work cut short
}

// hello greets ?name= (default "world").
func (s service) hello(w http.ResponseWriter, r *http.Request) {
	who := r.URL.Query().Get("name")
	if who == "" {
		who = "world"
	}
	if !utf8.ValidString(who) || utf8.RuneCountInString(who) > maxNameRunes {
		worker.Error(w, http.StatusBadRequest, fmt.Sprintf("parameter name must be valid UTF-8 of at most %d characters", maxNameRunes),
			map[string]any{"parameter": "name", "max": maxNameRunes})
		return
	}
	worker.JSON(w, http.StatusOK, map[string]string{"greeting": "hello, " + who, "worker": s.worker})
}

// work sleeps ?ms= milliseconds, a stand-in for a request that waits on
// something slow; the request's deadline (Route.Computes) cuts it short.
func (s service) work(w http.ResponseWriter, r *http.Request) {
	ms, err := strconv.Atoi(r.URL.Query().Get("ms"))
	if err != nil || ms < 0 || ms > maxWorkMs {
		worker.Error(w, http.StatusBadRequest, fmt.Sprintf("parameter ms must be an integer from 0 to %d", maxWorkMs),
			map[string]any{"parameter": "ms", "min": 0, "max": maxWorkMs})
		return
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		worker.JSON(w, http.StatusOK, map[string]int{"slept_ms": ms})
	case <-r.Context().Done():
		// The deadline, or the client gone (then nobody reads this).
		worker.Error(w, http.StatusServiceUnavailable, "request timed out after "+s.requestTimeout.String(),
			map[string]any{"timeout_ms": s.requestTimeout.Milliseconds()})
	}
}
