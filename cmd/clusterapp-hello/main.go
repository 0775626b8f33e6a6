// Command clusterapp-hello is a service of its own on clusterapp's worker
// runtime (package worker): the shipped units run it in place of the seed
// service with one drop-in, and it gets the suite's socket activation,
// health-gated READY=1 and watchdog, lossless drain, balancing, metrics and
// crash-loop pacing without a line of its own (docs/own-handler.md).
//
//	clusterapp-hello [serve] [--instance N]   run one worker (the unit's ExecStart=)
//	clusterapp-hello exited --instance N      count how worker N ended (ExecStopPost=)
//
// That command line is package command's, the one the shipped
// clusterapp-worker has too.
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
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/clusterapp/clusterapp/service/worker"
	"github.com/clusterapp/clusterapp/service/worker/command"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

// name is the program's name in messages and the worker's logs.
const name = "clusterapp-hello"

// Bounds of the routes' parameters.
const (
	maxNameRunes = 64
	maxWorkMs    = 10_000
)

// main runs the worker's command line (package command) over the routes.
func main() {
	p := command.Program{Name: name, Version: version, Routes: routes}
	os.Exit(command.Main(context.Background(), p, os.Args[1:], os.Stdout, os.Stderr))
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
