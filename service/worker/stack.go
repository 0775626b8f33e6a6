package worker

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/admission"
	"github.com/clusterapp/clusterapp/service/worker/metrics"
	"github.com/clusterapp/clusterapp/service/worker/probe"
	"github.com/clusterapp/clusterapp/service/worker/ratelimit"
	"github.com/clusterapp/clusterapp/service/worker/server"
	"github.com/sirupsen/logrus"
)

// StackOptions are what the handler stack is built from. Run fills them
// from the configuration; a test or benchmark of a service's routes fills
// them directly and gets the stack a client reaches, without a server.
type StackOptions struct {
	Name           string           // X-Worker header value
	Routes         []Route          // the service's routes
	Metrics        *metrics.Metrics // required; its Options.Routes are Labels of the routes
	Log            *logrus.Entry    // required
	MaxBodyBytes   int64            // request body cap; 0 means no body is accepted
	AccessLog      bool             // log one line per request
	DebugEndpoints bool             // serve /debug/crash, /debug/hang, /debug/leak
	RequestTimeout time.Duration    // deadline of the computing routes (Route.Computes)
	Crash          func()           // ends the process with a non-zero status (/debug/crash)
	Now            func() time.Time // the clock of the access log; time.Now when nil
	// Header says which responses carry X-Worker: every response when
	// empty (config.WorkerHeaderEvery), only the first of each connection
	// (config.WorkerHeaderConnection, where the server counts them:
	// server.RequestOnConn; every response where it does not), or none.
	Header config.WorkerHeader
	// NotReady says why the worker takes no new work, for /readyz's 503:
	// a state ("starting", "draining") and a sentence saying why; ("", "")
	// while it is ready. nil: always ready.
	NotReady func() (state, why string)

	// Protection, each optional (nil: off).
	RateLimit *ratelimit.Guard
	Admission *admission.Limiter
	// StuckAfter is the longest a request may hold an admission slot while
	// it can still be answered (run applies CLUSTERAPP_WRITE_TIMEOUT or
	// CLUSTERAPP_REQUEST_TIMEOUT, the longer). When every slot has been held
	// longer with no request finishing, /healthz answers 503, so the
	// watchdog stops pinging and systemd restarts the worker. 0 (the
	// default): never, as no request's end is bounded.
	StuckAfter time.Duration
}

// Stack is the handler stack a request passes through, outermost first:
// common headers and body cap, access log, per-client rate limit, admission
// control, routing with per-route metrics, the request deadline on the
// computing routes, the route. The cheapest refusals come first.
//
// With the debug routes on, requests pass through the stack's state lock
// (read side) on their way in. /debug/hang takes its write side and never releases it: every later
// request, the watchdog's health probe included, blocks the way it would
// behind a real deadlock, so the health-gated watchdog has something real to
// catch.
type Stack struct {
	opts    StackOptions
	handler http.Handler
	state   sync.RWMutex // read-held by every request with the debug routes on; write-held forever by /debug/hang
	leaked  [][]byte     // memory retained by /debug/leak, guarded by state
	// tooLarge answers 413 for each route's path (and unmatched), counted
	// in that route's metrics like every other answer.
	tooLarge map[string]http.Handler
}

// NewStack builds the stack.
func NewStack(o StackOptions) *Stack {
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Stack{opts: o, tooLarge: map[string]http.Handler{}}
	var h = s.router(o.Routes)
	if o.Admission != nil {
		h = o.Admission.Middleware(h)
	}
	if o.RateLimit != nil {
		h = o.RateLimit.Middleware(h)
	}
	if o.AccessLog {
		h = s.accessLog(h)
	}
	s.handler = s.common(h)
	return s
}

// ServeHTTP serves r through the whole stack.
func (s *Stack) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// common sets X-Worker (on the responses StackOptions.Header names),
// enforces the body cap and, with the debug routes on, passes through the
// state lock.
//
// X-Worker on every response costs a keep-alive request of / about 2% of
// its CPU on the 2-CPU guest of docs/benchmarks.md: net/http clones,
// searches, sorts and writes one more header. A connection stays with the
// worker that accepted it, so by default only its first response names
// the worker.
//
// Per request it allocates nothing of its own: the X-Worker value is one
// slice shared by every response (its length is its capacity, so a
// handler's Header().Add copies it rather than appending into it), and a
// request without a body (net/http gives it http.NoBody: most GETs) needs no
// MaxBytesReader.
//
// A request with a body gets a shallow copy carrying the capped body, as
// http.MaxBytesHandler does, and net/http's own request keeps its body. It
// must: net/http looks at that body after the handler to see whether a
// client that sent "Expect: 100-continue" was ever asked for the body, and
// closes the connection if not. With the body replaced in place it could not
// tell, read on to discard the body the client was still holding back, and
// both waited until CLUSTERAPP_READ_TIMEOUT (forever when 0).
func (s *Stack) common(next http.Handler) http.Handler {
	worker := []string{s.opts.Name}
	every := s.opts.Header == "" || s.opts.Header == config.WorkerHeaderEvery
	perConn := s.opts.Header == config.WorkerHeaderConnection
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if every || perConn && server.RequestOnConn(w) <= 1 {
			w.Header()["X-Worker"] = worker
		}
		if r.URL.Path == "" && r.Method != http.MethodConnect {
			r = atRoot(r)
		}
		if r.ContentLength > s.opts.MaxBodyBytes {
			h, ok := s.tooLarge[r.URL.Path]
			if !ok {
				h = s.tooLarge[unmatched]
			}
			h.ServeHTTP(w, r)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			capped := *r
			capped.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
			r = &capped
		}
		if s.opts.DebugEndpoints {
			// Empty on purpose: requests only wait here while /debug/hang
			// holds the lock. Without the debug routes nothing takes it,
			// and every request would still write the lock's shared
			// counter twice (about 50 ns a request on 2 CPUs).
			s.state.RLock()
			s.state.RUnlock()
		}
		next.ServeHTTP(w, r)
	})
}

// atRoot is r with the path "/": an absolute-form target with an empty path
// ("GET http://host HTTP/1.1", as a proxy may forward it) names the root
// (RFC 9110, section 4.2.3), not a path of its own to answer 404. r is
// net/http's, so it is copied, not changed.
func atRoot(r *http.Request) *http.Request {
	u := *r.URL
	u.Path = "/"
	root := *r
	root.URL = &u
	return &root
}

// bodyTooLarge answers a request whose Content-Length is over the cap.
func (s *Stack) bodyTooLarge(w http.ResponseWriter, r *http.Request) {
	Error(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is over the limit of %d bytes (CLUSTERAPP_MAX_BODY_BYTES)", r.ContentLength, s.opts.MaxBodyBytes),
		map[string]any{"max_bytes": s.opts.MaxBodyBytes})
}

func (s *Stack) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.opts.Now()
		sw := &metrics.StatusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if probe.Is(r) {
			return
		}
		s.opts.Log.WithFields(logrus.Fields{
			"method": Clip(r.Method), "path": Clip(r.URL.Path), "status": sw.Status(),
			"duration_ms": float64(s.since(start).Microseconds()) / 1000, "remote": r.RemoteAddr,
		}).Info("request")
	})
}

// healthz is liveness: the worker's handler stack answers. The watchdog
// probes this route in-process, so a worker that cannot answer it stops
// pinging systemd.
//
// It is exempt from admission control, so it answers while a worker is busy
// with every slot taken. That must not hide handlers that hold every slot
// and never return (a deadlock of theirs alone): the worker then answers
// every client 503 after CLUSTERAPP_ADMISSION_WAIT, for good, while the
// probe passed and the watchdog was fed. So liveness also fails once every
// slot has been held longer than any request may run (StuckAfter) with
// none finishing: busy requests end or are cut by then, stuck ones do not.
func (s *Stack) healthz(w http.ResponseWriter, _ *http.Request) {
	if s.opts.Admission != nil && s.opts.StuckAfter > 0 {
		if held := s.opts.Admission.Stalled(s.opts.Now()); held > s.opts.StuckAfter {
			slots := s.opts.Admission.Slots().Slots
			Error(w, http.StatusServiceUnavailable, fmt.Sprintf(
				"stuck: all %d admission slots (CLUSTERAPP_MAX_IN_FLIGHT) held for %s with no request finishing, longer than a request may run (%s: CLUSTERAPP_WRITE_TIMEOUT or CLUSTERAPP_REQUEST_TIMEOUT)",
				slots, held.Round(time.Second), s.opts.StuckAfter), map[string]any{"worker": s.opts.Name})
			return
		}
	}
	JSON(w, http.StatusOK, map[string]any{"status": "ok", "worker": s.opts.Name})
}

// readyz is readiness: 503 while the worker starts or drains, so a load
// balancer in front stops sending it new work. The 503 is the suite's error
// body, saying which (the state field, for a program) and why (the error,
// for the operator reading it), as /healthz's says "stuck".
func (s *Stack) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.opts.NotReady != nil {
		if state, why := s.opts.NotReady(); state != "" {
			Error(w, http.StatusServiceUnavailable, state+": "+why, map[string]any{"worker": s.opts.Name, "state": state})
			return
		}
	}
	JSON(w, http.StatusOK, map[string]any{"status": "ready", "worker": s.opts.Name})
}

// maxLeakMiB bounds one /debug/leak request.
const maxLeakMiB = 1024

// crash ends the process with a non-zero status, as an unhandled error would.
func (s *Stack) crash(http.ResponseWriter, *http.Request) {
	s.opts.Log.Error("crashing on request to " + crashPath)
	s.opts.Crash()
}

// hang takes the state lock and never releases it. Every request after it
// (health probe included) blocks behind it, like a real deadlock. With
// ?slot=1 it wedges only itself: the request never returns and keeps its
// admission slot, like a handler deadlocked on a lock of its own, while
// the stack (and /healthz) still answers.
func (s *Stack) hang(_ http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("slot") == "1" {
		s.opts.Log.Warn("wedging one request on " + hangPath + "?slot=1: it holds its admission slot for good")
		select {} // never returns, whatever its context says
	}
	s.opts.Log.Warn("wedging the worker on request to " + hangPath + ": every request will now block")
	s.state.Lock()
	select {} // hold the lock forever; the request is never answered
}

// leak retains mb MiB of touched memory until the process ends.
func (s *Stack) leak(w http.ResponseWriter, r *http.Request) {
	mb, err := strconv.Atoi(r.URL.Query().Get("mb"))
	if err != nil || mb < 1 || mb > maxLeakMiB {
		Error(w, http.StatusBadRequest, fmt.Sprintf("parameter mb must be an integer from 1 to %d", maxLeakMiB),
			map[string]any{"parameter": "mb", "min": 1, "max": maxLeakMiB})
		return
	}
	buf := make([]byte, mb<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1 // touch every page so it is resident, not just reserved
	}
	s.state.Lock()
	s.leaked = append(s.leaked, buf)
	total := 0
	for _, b := range s.leaked {
		total += len(b)
	}
	s.state.Unlock()
	JSON(w, http.StatusOK, map[string]any{"leaked_mib": mb, "retained_mib": total >> 20})
}
