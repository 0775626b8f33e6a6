package cache

import (
	"context"
	"errors"
	"testing"
	"time"
)

// waitLong bounds a wait that only a broken cache makes long: failing
// beats hanging the test binary.
const waitLong = 10 * time.Second

// result is what one Get returned.
type result struct {
	value []byte
	err   error
}

// started runs Get in a goroutine and returns where its result arrives.
func started(c *Cache, ctx context.Context, compute func(context.Context) ([]byte, error)) <-chan result {
	out := make(chan result, 1)
	go func() {
		v, _, err := c.Get(ctx, "k", compute)
		out <- result{v, err}
	}()
	return out
}

// watched is a cache reporting how many callers wait after each join.
func watched() (*Cache, <-chan int) {
	c := New(10, 1<<20, nil)
	joined := make(chan int, 16)
	c.joined = func(_ string, waiters int) { joined <- waiters }
	return c, joined
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLong):
		t.Fatalf("no %s within %v", what, waitLong)
		panic("unreachable")
	}
}

// blocking is a computation that hands out its context once it runs and
// answers "v" when released, or its context's error if that ends first.
func blocking() (compute func(context.Context) ([]byte, error), running <-chan context.Context, release chan<- struct{}) {
	run := make(chan context.Context, 1)
	rel := make(chan struct{})
	return func(ctx context.Context) ([]byte, error) {
		run <- ctx
		select {
		case <-rel:
			return []byte("v"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}, run, rel
}

// The caller that started a computation hanging up does not fail the
// others: it used to cancel the shared computation for everyone (a 503 to
// every identical /fib waiting).
func TestFirstCallerLeavingKeepsComputation(t *testing.T) {
	c, joined := watched()
	compute, running, release := blocking()
	firstCtx, cancelFirst := context.WithCancel(context.Background())
	first := started(c, firstCtx, compute)
	computeCtx := receive(t, running, "computation")
	second := started(c, context.Background(), compute)
	for receive(t, joined, "join") < 2 {
	}

	cancelFirst()
	if r := receive(t, first, "answer to the caller that left"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the caller that left got %q, %v; want context.Canceled", r.value, r.err)
	}
	if err := computeCtx.Err(); err != nil {
		t.Fatalf("the computation's context ended (%v) while a caller still waits", err)
	}
	close(release)
	if r := receive(t, second, "answer to the caller that stayed"); r.err != nil || string(r.value) != "v" {
		t.Fatalf("the caller that stayed got %q, %v; want \"v\"", r.value, r.err)
	}
	if v, hit, err := c.Get(context.Background(), "k", compute); !hit || string(v) != "v" || err != nil {
		t.Fatalf("after the computation: %q hit=%v %v; want the stored value", v, hit, err)
	}
}

// Once every caller has gone the computation is cancelled: nobody wants
// its result, and it holds a CPU. Each caller stops waiting at once.
func TestAllCallersLeavingCancelsComputation(t *testing.T) {
	c, joined := watched()
	finish := make(chan struct{})
	running := make(chan context.Context, 1)
	compute := func(ctx context.Context) ([]byte, error) {
		running <- ctx
		<-ctx.Done()
		<-finish // returns only when the test says so: the callers must not wait for it
		return nil, ctx.Err()
	}
	firstCtx, cancelFirst := context.WithCancel(context.Background())
	secondCtx, cancelSecond := context.WithCancel(context.Background())
	first := started(c, firstCtx, compute)
	computeCtx := receive(t, running, "computation")
	second := started(c, secondCtx, compute)
	for receive(t, joined, "join") < 2 {
	}
	defer close(finish)

	cancelSecond()
	if r := receive(t, second, "answer to the second caller"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("second caller got %q, %v; want context.Canceled at once", r.value, r.err)
	}
	if err := computeCtx.Err(); err != nil {
		t.Fatalf("the computation's context ended (%v) while the first caller waits", err)
	}
	cancelFirst()
	if r := receive(t, first, "answer to the first caller"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("first caller got %q, %v; want context.Canceled at once", r.value, r.err)
	}
	receive(t, computeCtx.Done(), "cancellation of the computation")
	if !errors.Is(computeCtx.Err(), context.Canceled) {
		t.Fatalf("computation's context ended with %v, want context.Canceled", computeCtx.Err())
	}
}

// The computation keeps the deadline of the caller that started it, also
// when that caller has left and another without a deadline waits: a
// computation never outlives the request timeout.
func TestComputationKeepsDeadline(t *testing.T) {
	c, joined := watched()
	compute, running, _ := blocking()
	deadline := time.Now().Add(500 * time.Millisecond)
	firstCtx, cancelFirst := context.WithDeadline(context.Background(), deadline)
	defer cancelFirst()
	first := started(c, firstCtx, compute)
	computeCtx := receive(t, running, "computation")
	if got, ok := computeCtx.Deadline(); !ok || !got.Equal(deadline) {
		t.Fatalf("the computation's deadline is %v (set: %v), want the caller's %v", got, ok, deadline)
	}
	second := started(c, context.Background(), compute)
	for receive(t, joined, "join") < 2 {
	}

	cancelFirst() // the client went away before the deadline
	receive(t, first, "answer to the caller that left")
	if r := receive(t, second, "answer to the caller without a deadline"); !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("caller without a deadline got %q, %v; want the computation's context.DeadlineExceeded", r.value, r.err)
	}
	if !errors.Is(computeCtx.Err(), context.DeadlineExceeded) {
		t.Fatalf("computation's context ended with %v, want context.DeadlineExceeded", computeCtx.Err())
	}
}

// A caller arriving after every caller left starts a new computation
// rather than join the cancelled one and get its context.Canceled.
func TestCallerAfterCancellationStartsAfresh(t *testing.T) {
	c, joined := watched()
	finish := make(chan struct{})
	stuck := func(ctx context.Context) ([]byte, error) {
		<-ctx.Done()
		<-finish // still running, cancelled, when the next caller comes
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := started(c, ctx, stuck)
	receive(t, joined, "join")
	cancel()
	receive(t, first, "answer to the caller that left")
	v, _, err := c.Get(context.Background(), "k", func(context.Context) ([]byte, error) { return []byte("v"), nil })
	close(finish)
	if err != nil || string(v) != "v" {
		t.Fatalf("caller after the cancellation got %q, %v; want a fresh computation's \"v\"", v, err)
	}
}

// A panic in the shared computation reaches the callers, as it did when
// they ran it themselves, rather than end the process from a goroutine no
// handler recovers.
func TestComputationPanicReachesCaller(t *testing.T) {
	c := New(10, 1<<20, nil)
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("no panic reached the caller")
		}
	}()
	c.Get(context.Background(), "k", func(context.Context) ([]byte, error) { panic("boom") })
}
