package oplock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A second Acquire waits for the first to be released, saying whom it
// waits for; a canceled wait returns the context's cause and holds nothing.
func TestSecondWaitsForTheFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "pool.lock")
	first, err := Acquire(context.Background(), path, "clusterapp reload", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("clusterapp reload (pid %d)", os.Getpid())
	if got := Holder(path); got != want {
		t.Fatalf("holder %q, want %q", got, want)
	}

	why := errors.New("interrupted")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(why) })
	var heard []string
	if _, err := Acquire(ctx, path, "clusterapp scale", func(h string) { heard = append(heard, h) }); !errors.Is(err, why) {
		t.Fatalf("canceled wait: %v, want the cause", err)
	}
	if len(heard) != 1 || heard[0] != want {
		t.Fatalf("waiting called with %q, want once with %q", heard, want)
	}

	got := make(chan error, 1)
	go func() {
		second, err := Acquire(context.Background(), path, "clusterapp scale", nil)
		if err == nil {
			second.Release()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("second Acquire returned while the first held the lock: %v", err)
	case <-time.After(3 * pollInterval):
	}
	first.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if h := Holder(path); h != "" {
		t.Errorf("holder after release: %q", h)
	}
}
