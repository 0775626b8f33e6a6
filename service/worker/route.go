package worker

import (
	"context"
	"encoding/json"
	"github.com/clusterapp/clusterapp/service/worker/admission"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/cache"
	"github.com/clusterapp/clusterapp/service/worker/probe"
	"github.com/sirupsen/logrus"
)

// Route is one route of a service: an exact path, the methods it answers
// (a GET route answers HEAD too; another method gets a JSON 405 with an
// Allow header) and its handler.
type Route struct {
	Path    string
	Methods []string
	Handler http.HandlerFunc
	// Computes puts the request's context under CLUSTERAPP_REQUEST_TIMEOUT's
	// deadline. Only routes that compute and read their context want one: a
	// timer context per request is a measurable cost on the fast routes
	// (docs/benchmarks.md, "handler stack").
	Computes bool
}

// Tools are what the worker lends a service's routes when it builds them.
type Tools struct {
	Name   string        // the worker's name, as X-Worker shows it
	Config config.Config // the CLUSTERAPP_* settings the worker runs with
	// Cache is the response cache CLUSTERAPP_CACHE_ENTRIES sizes, counted
	// in the worker's metrics; nil when the cache is off.
	Cache *cache.Cache
	Log   *logrus.Entry
}

// Routes builds a service's routes on the worker's tools. It must return
// the same paths, in the same order, whatever the tools: the paths lay out
// the pool's shared metrics table, which every process of the pool (and
// `clusterapp-worker exited`, run after a worker's process ends) must place alike.
type Routes func(Tools) []Route

// The worker's own routes, served before a service's: liveness (the
// watchdog's probe), readiness, and the fault-injection routes behind
// CLUSTERAPP_DEBUG_ENDPOINTS.
const (
	ReadyPath = "/readyz"
	crashPath = "/debug/crash"
	hangPath  = "/debug/hang"
	leakPath  = "/debug/leak"
)

// Unprotected are the routes admission control and the rate limit never
// apply to: systemd's watchdog, load balancers and Prometheus must see an
// overloaded worker as it is, not queue behind its work.
var Unprotected = []string{probe.Path, ReadyPath}

// unmatched is the route label of requests no route matches.
const unmatched = "unmatched"

// StatusClientClosed is nginx's 499, "client closed request", for a request
// whose client left before it was answered: not a status net/http names,
// and nobody reads it, but the route's metrics and the access log then
// count a client hanging up as the client's doing, not as a 5xx. Admission
// control records it for a client that leaves while queued for a slot.
const StatusClientClosed = admission.StatusClientClosed

// Labels are the route labels the worker counts requests under with
// routes: the service's paths, the worker's own routes (debug ones
// included, so every worker lays out the shared metrics table alike
// whatever its settings), and "unmatched".
func Labels(routes Routes) []string {
	var labels []string
	if routes != nil {
		for _, r := range routes(Tools{}) {
			labels = append(labels, r.Path)
		}
	}
	return append(labels, probe.Path, ReadyPath, crashPath, hangPath, leakPath, unmatched)
}

// router dispatches on the exact path, counting each route under its label
// in the metrics, and answers 404 and 405 in JSON.
func (s *Stack) router(routes []Route) http.Handler {
	table := map[string]http.Handler{}
	add := func(r Route) {
		methods := r.Methods
		if len(methods) == 0 {
			methods = []string{http.MethodGet}
		}
		if slices.Contains(methods, http.MethodGet) && !slices.Contains(methods, http.MethodHead) {
			methods = append(slices.Clip(methods), http.MethodHead)
		}
		h := r.Handler
		if r.Computes {
			h = s.deadline(h)
		}
		table[r.Path] = s.opts.Metrics.Instrument(r.Path)(allowOnly(methods, h))
		s.tooLarge[r.Path] = s.opts.Metrics.Instrument(r.Path)(http.HandlerFunc(s.bodyTooLarge))
	}
	for _, r := range routes {
		add(r)
	}
	add(Route{Path: probe.Path, Handler: s.healthz})
	add(Route{Path: ReadyPath, Handler: s.readyz})
	if s.opts.DebugEndpoints {
		add(Route{Path: crashPath, Methods: []string{http.MethodGet, http.MethodPost}, Handler: s.crash})
		add(Route{Path: hangPath, Methods: []string{http.MethodGet, http.MethodPost}, Handler: s.hang})
		add(Route{Path: leakPath, Methods: []string{http.MethodGet, http.MethodPost}, Handler: s.leak})
	}
	s.tooLarge[unmatched] = s.opts.Metrics.Instrument(unmatched)(http.HandlerFunc(s.bodyTooLarge))
	paths := slices.Sorted(maps.Keys(table))
	notFound := s.opts.Metrics.Instrument(unmatched)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Error(w, http.StatusNotFound, "no route for "+Clip(asked(r)), map[string]any{"routes": paths})
	}))
	options := s.opts.Metrics.Instrument(unmatched)(http.HandlerFunc(serverOptions))
	preface := s.opts.Metrics.Instrument(unmatched)(http.HandlerFunc(http2Preface))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := table[r.URL.Path]; ok {
			h.ServeHTTP(w, r)
			return
		}
		if r.RequestURI == "*" && r.Method == http.MethodOptions {
			options.ServeHTTP(w, r)
			return
		}
		if r.Method == "PRI" && r.ProtoMajor == 2 {
			preface.ServeHTTP(w, r)
			return
		}
		notFound.ServeHTTP(w, r)
	})
}

// asked is what r asks for, as a 404 names it: its path, or, for CONNECT's
// authority form (common gives an absolute URI without a path "/"), the
// authority. The caller clips it: a client chooses its length.
func asked(r *http.Request) string {
	if r.URL.Path == "" {
		return r.RequestURI
	}
	return r.URL.Path
}

// serverOptions answers "OPTIONS * HTTP/1.1", a question about the server
// rather than a resource, as net/http's own answer does (200, no body).
// The server (service/worker/server) sets DisableGeneralOptionsHandler so
// the request reaches the stack: net/http's answer, written before any
// handler, carried no X-Worker and was not counted. It is counted under
// "unmatched", the label of requests no route matches.
func serverOptions(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// http2Preface answers the HTTP/2 connection preface, "PRI * HTTP/2.0",
// which net/http passes to the handler: a client speaking HTTP/2 without
// TLS from its first byte (h2c with prior knowledge). The port speaks
// HTTP/1.1 only (an h2c upgrade header is ignored), which the 505 says
// rather than "no route for *"; net/http closes the connection after it.
func http2Preface(w http.ResponseWriter, _ *http.Request) {
	Error(w, http.StatusHTTPVersionNotSupported, "HTTP/2 without TLS (h2c with prior knowledge) is not served: this port speaks HTTP/1.1", nil)
}

// allowOnly answers a JSON 405 with an Allow header to other methods.
func allowOnly(methods []string, next http.HandlerFunc) http.Handler {
	allow := strings.Join(methods, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(methods, r.Method) {
			w.Header().Set("Allow", allow)
			Error(w, http.StatusMethodNotAllowed, "method "+Clip(r.Method)+" not allowed on "+r.URL.Path, map[string]any{"allow": methods})
			return
		}
		next(w, r)
	})
}

// deadline bounds a computing route's context by RequestTimeout.
func (s *Stack) deadline(next http.HandlerFunc) http.HandlerFunc {
	if s.opts.RequestTimeout <= 0 {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
		defer cancel()
		next(w, r.WithContext(ctx))
	}
}

// JSON writes v as a JSON response with the given status.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do about it
}

// Error writes the worker's error body, {"error": msg, "status": code,
// ...extra}: every refusal of the suite (404, 405, 413, 429, 503) reads
// alike.
func Error(w http.ResponseWriter, status int, msg string, extra map[string]any) {
	body := map[string]any{"error": msg, "status": status}
	for k, v := range extra {
		body[k] = v
	}
	JSON(w, status, body)
}

// since is the time from start to now on the stack's clock.
func (s *Stack) since(start time.Time) time.Duration { return s.opts.Now().Sub(start) }
