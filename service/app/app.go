// Package app is the seed service: the workloads of the Node.js cluster
// articles clusterapp is measured against. / answers a short text, /fib
// computes a Fibonacci number by naive recursion (the CPU-bound workload),
// /slow sums the squares of 100,000 random numbers (an allocation and a
// loop).
//
// It is one service among many that package worker can run: Routes is all
// that cmd/clusterapp passes to worker.Run. Health, readiness, metrics,
// admission, the rate limit and the fault-injection routes are the
// worker's.
package app

import (
	"time"

	"github.com/clusterapp/clusterapp/service/worker"
	"github.com/clusterapp/clusterapp/service/worker/cache"
)

// app is the routes' settings, taken from the worker's tools.
type app struct {
	fibMaxN        int           // largest n for /fib
	cache          *cache.Cache  // nil: /fib computes every time
	cacheMaxAge    time.Duration // Cache-Control max-age of cached responses
	requestTimeout time.Duration // named in the 503 of a /fib stopped by its deadline
}

// Routes are the seed service's routes (worker.Routes).
func Routes(t worker.Tools) []worker.Route {
	a := &app{
		fibMaxN: t.Config.FibMaxN, cache: t.Cache,
		cacheMaxAge: t.Config.CacheMaxAge, requestTimeout: t.Config.RequestTimeout,
	}
	return []worker.Route{
		{Path: "/", Handler: a.index},
		{Path: "/fib", Handler: a.fib, Computes: true},
		{Path: "/slow", Handler: a.slow},
	}
}
