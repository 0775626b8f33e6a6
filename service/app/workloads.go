package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/clusterapp/clusterapp/service/app/workload"
	"github.com/clusterapp/clusterapp/service/worker"
)

// defaultFibN is the n the articles use: fibonacci(40) costs about a second
// of CPU in Node.js and a few hundred milliseconds in Go.
const defaultFibN = 40

// helloWorld is the / body, one slice for every response.
var helloWorld = []byte("Hello World!\n")

func (a *app) index(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(helloWorld) // a write error means the client left
}

// fibRun is Fib that gives up when its context ends. Subtrees of n <=
// fibLeaf run as plain Fib (about 30k calls, tens of microseconds), and the
// context is checked once above each of them, so a cancelled request stops
// computing well within a millisecond while the computation itself costs what
// plain Fib costs: a check on every call (a counter and a branch) made /fib
// measurably slower than the same route on bare net/http (docs/benchmarks.md,
// "The handler stack against bare net/http").
type fibRun struct {
	ctx context.Context
	err error
}

// fibLeaf is the largest n computed without looking at the context.
const fibLeaf = 22

func (f *fibRun) fib(n int) uint64 {
	if n <= fibLeaf {
		return workload.Fib(n)
	}
	if f.err == nil {
		f.err = f.ctx.Err()
	}
	if f.err != nil {
		return 0
	}
	return f.fib(n-1) + f.fib(n-2)
}

// fibBody computes the /fib response body, or fails when ctx ends first.
func fibBody(ctx context.Context, n int) ([]byte, error) {
	run := &fibRun{ctx: ctx}
	v := run.fib(n)
	if run.err != nil {
		return nil, run.err
	}
	return []byte(fmt.Sprintf(`{"fib":%d,"n":%d}`+"\n", v, n)), nil
}

func (a *app) fib(w http.ResponseWriter, r *http.Request) {
	n, msg := fibN(r.URL.RawQuery, a.fibMaxN)
	if msg != "" {
		worker.Error(w, http.StatusBadRequest, msg, map[string]any{"parameter": "n", "min": 0, "max": a.fibMaxN})
		return
	}
	var body []byte
	var err error
	if a.cache == nil {
		body, err = fibBody(r.Context(), n)
	} else {
		var hit bool
		body, hit, err = a.cache.Get(r.Context(), "fib:"+strconv.Itoa(n), func(ctx context.Context) ([]byte, error) { return fibBody(ctx, n) })
		if err == nil {
			w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(a.cacheMaxAge.Seconds())))
			w.Header().Set("X-Cache", map[bool]string{true: "HIT", false: "MISS"}[hit])
		}
	}
	if err != nil {
		a.stopped(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body) // a write error means the client left
}

// stopped answers a /fib whose computation ended without a result. Only a
// deadline is the server's 503 naming CLUSTERAPP_REQUEST_TIMEOUT: a client
// that closed its connection (net/http then cancels the request's context)
// used to be answered and counted the same, a 5xx blaming a timeout that
// never fired.
func (a *app) stopped(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		worker.Error(w, http.StatusServiceUnavailable, fmt.Sprintf("computation stopped: %v (CLUSTERAPP_REQUEST_TIMEOUT=%s)", err, a.requestTimeout), nil)
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		w.WriteHeader(worker.StatusClientClosed) // no body: the client is gone
	default:
		worker.Error(w, http.StatusInternalServerError, fmt.Sprintf("computation failed: %v", err), nil)
	}
}

func (a *app) slow(w http.ResponseWriter, _ *http.Request) {
	worker.JSON(w, http.StatusOK, map[string]any{"count": workload.SlowCount, "sum_of_squares": workload.SumOfSquares(workload.SlowCount)})
}

// fibN reads n from a /fib query, or says what is wrong with it. A query
// that does not parse, or that gives n more than once, is refused rather
// than read one way here and another way by a cache or proxy in front:
// URL.Query() drops malformed pairs silently, so /fib?n=%zz used to run
// the default n=40, seconds of CPU, and answer 200.
func fibN(rawQuery string, maxN int) (int, string) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return 0, fmt.Sprintf("malformed query string: %v; expected n=N with N an integer from 0 to %d", err, maxN)
	}
	raw, ok := q["n"]
	switch {
	case !ok:
		return defaultFibN, ""
	case len(raw) > 1:
		return 0, fmt.Sprintf("parameter n is given %d times; give it once, an integer from 0 to %d", len(raw), maxN)
	}
	v, err := strconv.Atoi(raw[0])
	if err != nil || v < 0 || v > maxN {
		return 0, fmt.Sprintf("parameter n must be an integer from 0 to %d, got %q", maxN, worker.Clip(raw[0]))
	}
	return v, ""
}
