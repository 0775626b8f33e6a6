package cache

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
)

// flight is one running computation of a key and the callers waiting for
// it. value and err are set before done is closed; waiters is guarded by
// Cache.mu.
type flight struct {
	done    chan struct{}
	value   []byte
	err     error
	waiters int
	cancel  context.CancelFunc // cancels the computation's context
}

// errExited is what waiters get when compute called runtime.Goexit.
var errExited = errors.New("cache: computation exited without a result")

// panicError carries a panic of compute, with its stack, to the waiters.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string {
	return fmt.Sprintf("cache: computation panicked: %v\n\n%s", p.value, p.stack)
}

// join makes the caller a waiter of key's running computation, starting one
// when none runs, or returns the value when it was stored since Get looked
// (stored true). Both checks and store-and-finish (finish) hold mu, so a
// caller sees either the computation or its stored result.
func (c *Cache) join(ctx context.Context, key string, compute func(context.Context) ([]byte, error)) (f *flight, value []byte, stored bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.lookupLocked(key); ok {
		return nil, v, true
	}
	f, ok := c.flights[key]
	if !ok {
		f = &flight{done: make(chan struct{})}
		var fctx context.Context
		fctx, f.cancel = detach(ctx)
		c.flights[key] = f
		go c.run(fctx, key, f, compute)
	}
	f.waiters++
	if c.joined != nil {
		c.joined(key, f.waiters)
	}
	return f, nil, false
}

// detach is ctx's values and deadline without its cancellation.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	free := context.WithoutCancel(ctx)
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(free, deadline)
	}
	return context.WithCancel(free)
}

// leave removes a caller that stopped waiting; the last one cancels the
// computation, and takes it out of the running ones so that a caller
// arriving now starts afresh instead of joining a cancelled computation.
func (c *Cache) leave(key string, f *flight) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f.waiters--
	if f.waiters > 0 {
		return
	}
	if c.flights[key] == f {
		delete(c.flights, key)
	}
	f.cancel()
}

// run calls compute and hands its result to the waiters. A panic is
// recovered here, since no handler's recovery covers this goroutine, and
// raised again in each waiter (Get), as singleflight.Group.Do does.
func (c *Cache) run(ctx context.Context, key string, f *flight, compute func(context.Context) ([]byte, error)) {
	var value []byte
	err := errExited // kept only if compute calls runtime.Goexit
	defer func() { c.finish(key, f, value, err) }()
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	value, err = compute(ctx)
}

// finish stores a successful value, retires the computation and wakes its
// waiters.
func (c *Cache) finish(key string, f *flight, value []byte, err error) {
	f.cancel() // releases the deadline's timer
	if err == nil {
		c.store(key, value)
	}
	c.mu.Lock()
	if c.flights[key] == f {
		delete(c.flights, key)
	}
	c.mu.Unlock()
	f.value, f.err = value, err
	close(f.done)
}
