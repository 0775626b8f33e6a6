// Package app holds the worker's routes: the workloads of the Node.js cluster
// articles clusterapp is measured against (/, /fib, /slow), health and
// readiness for systemd and load balancers, Prometheus metrics, and, only when
// enabled, fault-injection routes for tests and demos.
//
// Every route is registered in one table with its allowed methods, so an
// unknown path is a JSON 404, a wrong method a JSON 405 with an Allow header,
// and metrics are labelled by route rather than raw path.
//
// Requests pass through the app's shared state lock (read side) on their way
// in. /debug/hang takes its write side and never releases it: every later
// request, the watchdog's health probe included, blocks the way it would
// behind a real deadlock, so the health-gated watchdog has something real to
// catch.
package app

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/clusterapp/clusterapp/service/admission"
	"github.com/clusterapp/clusterapp/service/cache"
	"github.com/clusterapp/clusterapp/service/metrics"
	"github.com/clusterapp/clusterapp/service/ratelimit"
	"github.com/sirupsen/logrus"
)

// Options configure the routes. Zero values are not useful; cmd fills every field.
type Options struct {
	Instance       string           // X-Worker header value
	FibMaxN        int              // largest n for /fib
	MaxBodyBytes   int64            // request body cap; 0 means no body is accepted
	AccessLog      bool             // log one line per request
	DebugEndpoints bool             // serve /debug/*
	Ready          func() bool      // false while starting or draining: /readyz answers 503
	Crash          func()           // ends the process with a non-zero status (/debug/crash)
	Metrics        *metrics.Metrics // required
	Log            *logrus.Entry    // required
	Now            func() time.Time // defaults to time.Now

	// Protection, each optional (nil or zero: off). See the packages
	// ratelimit, admission and cache.
	RateLimit      *ratelimit.Middleware
	Admission      *admission.Limiter
	Cache          *cache.Cache
	CacheMaxAge    time.Duration // Cache-Control max-age of cached routes
	RequestTimeout time.Duration // deadline of every request's computation
}

// Unprotected are the routes admission control and the rate limit never
// apply to: systemd's watchdog, load balancers and Prometheus must see an
// overloaded worker as it is, not queue behind its work.
var Unprotected = []string{"/healthz", "/readyz"}

// App is the routes and the state they share.
type App struct {
	opts   Options
	state  sync.RWMutex // read-held by every request; write-held forever by /debug/hang
	leaked [][]byte     // memory retained by /debug/leak, guarded by state
}

// New returns the application.
func New(opts Options) *App {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &App{opts: opts}
}

// Handler returns the whole handler stack: common headers and body cap,
// access log, per-client rate limit, admission control, routing, per-route
// metrics, and the request deadline on the routes that compute. The cheapest
// refusals come first.
func (a *App) Handler() http.Handler {
	var h http.Handler = a.router()
	if a.opts.Admission != nil {
		h = a.opts.Admission.Middleware(h)
	}
	if a.opts.RateLimit != nil {
		h = a.opts.RateLimit.Wrap(h)
	}
	if a.opts.AccessLog {
		h = a.accessLog(h)
	}
	return a.common(h)
}

// common sets X-Worker on every response, enforces the body cap and passes
// through the shared state lock.
//
// Per request it allocates nothing of its own: the X-Worker value is one
// slice shared by every response (its length is its capacity, so a
// handler's Header().Add copies it rather than appending into it), and a request without a body (net/http
// gives it http.NoBody: most GETs) needs no MaxBytesReader.
func (a *App) common(next http.Handler) http.Handler {
	worker := []string{a.opts.Instance}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["X-Worker"] = worker
		if r.ContentLength > a.opts.MaxBodyBytes {
			writeError(w, http.StatusRequestEntityTooLarge, "request body too large", map[string]any{"max_bytes": a.opts.MaxBodyBytes})
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, a.opts.MaxBodyBytes)
		}
		a.state.RLock()
		a.state.RUnlock() // empty on purpose: requests only wait here while /debug/hang holds the lock
		next.ServeHTTP(w, r)
	})
}

func (a *App) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := a.opts.Now()
		sw := &metrics.StatusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if metrics.IsUnobserved(r.Context()) {
			return
		}
		a.opts.Log.WithFields(logrus.Fields{
			"method": r.Method, "path": r.URL.Path, "status": sw.Status(),
			"duration_ms": float64(a.opts.Now().Sub(start).Microseconds()) / 1000, "remote": r.RemoteAddr,
		}).Info("request")
	})
}

// deadline bounds a computing route's context by RequestTimeout: the route
// (fib) checks its context and stops when it expires. Only routes that
// compute get one: a timer context per request (a timer, a cancel
// registration with the connection's context, a copy of the request) cost
// the fast routes 5% of a worker's CPU under keep-alive load, for a
// deadline they never read (docs/benchmarks.md).
func (a *App) deadline(next http.HandlerFunc) http.HandlerFunc {
	if a.opts.RequestTimeout <= 0 {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
		defer cancel()
		next(w, r.WithContext(ctx))
	}
}
