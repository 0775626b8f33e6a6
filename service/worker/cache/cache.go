// Package cache keeps results of deterministic CPU-bound computations.
//
// fib(n) is the same for every request, so once computed it can be served
// from memory; identical requests arriving together are computed once
// (singleflight) instead of once each, which is what turns a spike of
// identical expensive requests into one computation. The cache is bounded in
// entries and in bytes and evicts the least recently used entry.
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

	"golang.org/x/sync/singleflight"
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

	mu    sync.Mutex
	lru   *list.List // front = most recently used
	items map[string]*list.Element
	bytes int64
	group singleflight.Group
}

type entry struct {
	key   string
	value []byte
}

// New returns a cache holding at most maxEntries entries and maxBytes bytes
// of keys and values. obs may be nil.
func New(maxEntries int, maxBytes int64, obs Observer) *Cache {
	return &Cache{maxEntries: maxEntries, maxBytes: maxBytes, obs: obs, lru: list.New(), items: map[string]*list.Element{}}
}

// Get returns the value for key, computing it with compute on a miss.
// Concurrent misses of one key share one call of compute. hit reports whether
// the value came from the cache. An error is returned to every waiter and
// nothing is stored.
func (c *Cache) Get(ctx context.Context, key string, compute func(context.Context) ([]byte, error)) (value []byte, hit bool, err error) {
	if v, ok := c.lookup(key); ok {
		c.observe(true)
		return v, true, nil
	}
	c.observe(false)
	v, err, _ := c.group.Do(key, func() (any, error) {
		if v, ok := c.lookup(key); ok { // stored while this call waited for the group
			return v, nil
		}
		v, err := compute(ctx)
		if err == nil {
			c.store(key, v)
		}
		return v, err
	})
	if err != nil {
		return nil, false, err
	}
	return v.([]byte), false, nil
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
