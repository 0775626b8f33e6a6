// Package cache keeps results of deterministic CPU-bound computations.
//
// fib(n) is the same for every request, so once computed it can be served
// from memory; identical requests arriving together are computed once
// (singleflight) instead of once each, which is what turns a spike of
// identical expensive requests into one computation. The cache is bounded in
// entries and in bytes and evicts the least recently used entry.
//
// # Cancellation
//
// A shared computation belongs to no single caller, so one caller hanging up
// must not fail the others (it did: the computation ran under the first
// caller's context, and every identical request waiting for it got that
// caller's context.Canceled). The computation's context therefore carries
// the values of the caller that started it but not its cancellation
// (context.WithoutCancel), and it is cancelled when the last caller waiting
// for it stops waiting: callers are counted as they join and leave. A caller
// whose own context ends stops waiting at once and gets its context's error.
// A caller arriving after the last one left starts a new computation rather
// than join one being cancelled.
//
// The computation keeps the deadline of the caller that started it. Every
// caller of a route has the same request timeout and joins later, so that is
// the earliest deadline: a computation never runs longer than one request may
// (CLUSTERAPP_REQUEST_TIMEOUT), however many identical requests keep
// arriving, and a caller that joins later gets the computation's
// context.DeadlineExceeded when it runs out, before its own deadline.
//
// It is off by default (the suite's /fib must stay an honest CPU workload for
// benchmarks) and switched on in the environment file. When on, cacheable
// responses also carry Cache-Control so a front cache (nginx proxy_cache) may
// store them too.
package cache

import (
	"container/list"
	"context"
	"sync"
)

// Observer counts hits and misses (the metrics package implements it).
type Observer interface {
	Hit()
	Miss()
}

// Cache is a bounded LRU of byte values with singleflight computation.
type Cache struct {
	maxEntries int
	maxBytes   int64
	obs        Observer

	mu      sync.Mutex
	lru     *list.List // front = most recently used
	items   map[string]*list.Element
	bytes   int64
	flights map[string]*flight // computations running, by key

	// joined, when set (tests), is called with mu held each time a caller
	// starts waiting for a computation, with how many now wait for it.
	joined func(key string, waiters int)
}

type entry struct {
	key   string
	value []byte
}

// New returns a cache holding at most maxEntries entries and maxBytes bytes
// of keys and values. obs may be nil.
func New(maxEntries int, maxBytes int64, obs Observer) *Cache {
	return &Cache{
		maxEntries: maxEntries, maxBytes: maxBytes, obs: obs,
		lru: list.New(), items: map[string]*list.Element{}, flights: map[string]*flight{},
	}
}

// Get returns the value for key, computing it with compute on a miss.
// Concurrent misses of one key share one call of compute, run on a context
// of its own (see the package comment): it is cancelled once every caller
// waiting for it has gone, and bounded by the deadline of the caller that
// started it. hit reports whether the value came from the cache. When ctx
// ends first, Get returns ctx.Err() at once. An error of compute is returned
// to every waiter and nothing is stored; a panic of compute is raised again
// in every waiter.
func (c *Cache) Get(ctx context.Context, key string, compute func(context.Context) ([]byte, error)) (value []byte, hit bool, err error) {
	if v, ok := c.lookup(key); ok {
		c.observe(true)
		return v, true, nil
	}
	c.observe(false)
	if err := ctx.Err(); err != nil {
		return nil, false, err // nobody to compute for
	}
	f, v, stored := c.join(ctx, key, compute)
	if stored {
		return v, false, nil
	}
	select {
	case <-f.done:
		if p, ok := f.err.(*panicError); ok {
			panic(p)
		}
		return f.value, false, f.err
	case <-ctx.Done():
		c.leave(key, f)
		return nil, false, ctx.Err()
	}
}

func (c *Cache) observe(hit bool) {
	switch {
	case c.obs == nil:
	case hit:
		c.obs.Hit()
	default:
		c.obs.Miss()
	}
}

func (c *Cache) lookup(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookupLocked(key)
}

func (c *Cache) lookupLocked(key string) ([]byte, bool) {
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*entry).value, true
}

func (c *Cache) store(key string, value []byte) {
	size := int64(len(key) + len(value))
	if size > c.maxBytes {
		return // larger than the whole cache
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return
	}
	c.items[key] = c.lru.PushFront(&entry{key: key, value: value})
	c.bytes += size
	for c.lru.Len() > c.maxEntries || c.bytes > c.maxBytes {
		oldest := c.lru.Back()
		e := oldest.Value.(*entry)
		c.lru.Remove(oldest)
		delete(c.items, e.key)
		c.bytes -= int64(len(e.key) + len(e.value))
	}
}

// Len is the number of entries.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// Bytes is the size of keys and values held.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
