package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestHitAfterMiss(t *testing.T) {
	c := New(10, 1<<20, nil)
	calls := 0
	compute := func(context.Context) ([]byte, error) { calls++; return []byte("v"), nil }
	if v, hit, err := c.Get(context.Background(), "k", compute); err != nil || hit || string(v) != "v" {
		t.Fatalf("first Get = %q %v %v", v, hit, err)
	}
	if v, hit, _ := c.Get(context.Background(), "k", compute); !hit || string(v) != "v" || calls != 1 {
		t.Fatalf("second Get = %q hit=%v calls=%d", v, hit, calls)
	}
}

func TestConcurrentMissesComputeOnce(t *testing.T) {
	c := New(10, 1<<20, nil)
	var calls atomic.Int32
	release := make(chan struct{})
	compute := func(context.Context) ([]byte, error) {
		calls.Add(1)
		<-release
		return []byte("v"), nil
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if v, _, err := c.Get(context.Background(), "k", compute); err != nil || string(v) != "v" {
				t.Errorf("Get = %q %v", v, err)
			}
		})
	}
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if calls.Load() != 1 {
		t.Fatalf("computed %d times, want once", calls.Load())
	}
}

func TestBoundedByEntriesAndBytes(t *testing.T) {
	c := New(3, 1<<20, nil)
	for i := range 5 {
		c.Get(context.Background(), fmt.Sprint(i), func(context.Context) ([]byte, error) { return []byte("x"), nil })
	}
	if c.Len() != 3 {
		t.Fatalf("%d entries, want 3", c.Len())
	}
	if _, hit, _ := c.Get(context.Background(), "0", func(context.Context) ([]byte, error) { return []byte("x"), nil }); hit {
		t.Fatal("the least recently used entry was kept")
	}
	b := New(100, 20, nil)
	for i := range 5 {
		b.Get(context.Background(), fmt.Sprint(i), func(context.Context) ([]byte, error) { return []byte("0123456789"), nil })
	}
	if b.Bytes() > 20 || b.Len() != 1 {
		t.Fatalf("%d bytes in %d entries, want at most 20", b.Bytes(), b.Len())
	}
}

func TestErrorsAreNotCached(t *testing.T) {
	c := New(10, 1<<20, nil)
	boom := errors.New("boom")
	if _, _, err := c.Get(context.Background(), "k", func(context.Context) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if _, hit, err := c.Get(context.Background(), "k", func(context.Context) ([]byte, error) { return []byte("v"), nil }); hit || err != nil {
		t.Fatalf("after an error: hit=%v err=%v", hit, err)
	}
}
