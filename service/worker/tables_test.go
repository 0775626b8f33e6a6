package worker

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

type fakeTable struct {
	why  atomic.Value // string
	err  error
	seen atomic.Int32
}

func (f *fakeTable) Detached() (string, error) {
	f.seen.Add(1)
	why, _ := f.why.Load().(string)
	return why, f.err
}

// A worker whose table loses its name leaves after its own pause, once, and
// says why; an unreadable table is logged once and does not make it leave.
func TestWatchTablesLeavesOnceATableIsDetached(t *testing.T) {
	logger, hook := test.NewNullLogger()
	logger.SetOutput(io.Discard)
	ok, broken := &fakeTable{}, &fakeTable{err: errors.New("stat: permission denied")}
	ok.why.Store("")
	out := make(chan string, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchTables(ctx, []detacher{broken, ok}, time.Millisecond, 30*time.Millisecond, logrus.NewEntry(logger), out)
	}()
	for ok.seen.Load() < 5 {
		time.Sleep(time.Millisecond)
	}
	select {
	case why := <-out:
		t.Fatalf("left with %q while every table keeps its name", why)
	default:
	}
	ok.why.Store("/run/clusterapp/ratelimit.v2.65536.table was removed")
	start := time.Now()
	why := <-out
	if why != "/run/clusterapp/ratelimit.v2.65536.table was removed" {
		t.Errorf("left with %q", why)
	}
	if waited := time.Since(start); waited < 30*time.Millisecond {
		t.Errorf("left after %v, before its pause of 30ms", waited)
	}
	<-done // it sends once and returns
	warned := 0
	for _, e := range hook.AllEntries() {
		if e.Message == "cannot check a shared table's file" {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("the unreadable table was logged %d times, want once", warned)
	}
	if last := hook.LastEntry(); last == nil || last.Data["table"] != why {
		t.Errorf("last log entry %v, want the warning naming the table", last)
	}
}

func TestStaggerFor(t *testing.T) {
	for name, want := range map[string]time.Duration{"1": 0, "2": tablesStagger, "9": 8 * tablesStagger, "121": 0, "pid-7": 0, "0": 0} {
		if got := staggerFor(name); got != want {
			t.Errorf("staggerFor(%q) = %v, want %v", name, got, want)
		}
	}
}
