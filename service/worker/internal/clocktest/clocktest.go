// Package clocktest is the wall clock the worker's tests inject through
// the packages' Options.Now seam: it moves only when the test says so.
package clocktest

import (
	"sync"
	"time"
)

// Manual is a wall clock at a fixed time until Advance moves it; its zero
// value reads the zero time. Safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// Now is the clock's time (an Options.Now).
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// At is a Manual clock reading t.
func At(t time.Time) *Manual { return &Manual{now: t} }
