package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// readings is a fake memory reader: one resident size per call, the last
// repeated; an error where a value is 0. The live heap is live, under a
// heap limit of 90.
type readings struct {
	mu   sync.Mutex
	v    []uint64
	live uint64
	n    int
}

func (r *readings) read() (memory, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.v[min(r.n, len(r.v)-1)]
	r.n++
	if v == 0 {
		return memory{}, errors.New("no /proc")
	}
	return memory{rss: v, live: r.live, heapLimit: 90}, nil
}

func (r *readings) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// watchFor runs a watch over vs until it sends or has taken at least
// `calls` readings, and returns what it sent ("" for nothing) and its log.
func watchFor(t *testing.T, vs []uint64, calls int, settle time.Duration, clock func() time.Time) (string, []*logrus.Entry) {
	t.Helper()
	return watch(t, &readings{v: vs, live: 50}, calls, settle, clock, nil)
}

func watch(t *testing.T, r *readings, calls int, settle time.Duration, clock func() time.Time, relax func()) (string, []*logrus.Entry) {
	t.Helper()
	return watchWith(t, rssWatch{limit: 100, setting: "100B"}, r, calls, settle, clock, relax)
}

func watchWith(t *testing.T, w rssWatch, r *readings, calls int, settle time.Duration, clock func() time.Time, relax func()) (string, []*logrus.Entry) {
	t.Helper()
	l, hook := test.NewNullLogger()
	out := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.every, w.settle, w.read, w.relax, w.now, w.log = time.Millisecond, settle, r.read, relax, clock, logrus.NewEntry(l)
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx, time.Unix(0, 0), out) }()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case why := <-out:
			cancel()
			<-done
			return why, hook.AllEntries()
		case <-deadline:
			t.Fatalf("the watch took %d readings in 10s", r.calls())
		case <-time.After(time.Millisecond):
			if r.calls() >= calls {
				cancel()
				<-done
				return "", hook.AllEntries()
			}
		}
	}
}

func late() time.Time { return time.Unix(60, 0) } // a minute after the watch's start

func TestRSSWatchRecyclesAfterReadingsInARowOverTheLimit(t *testing.T) {
	why, log := watchFor(t, []uint64{50, 150, 80, 150, 150}, 50, 10*time.Second, late)
	if !strings.Contains(why, "over CLUSTERAPP_MAX_RSS=100B") {
		t.Fatalf("sent %q, want the reason naming CLUSTERAPP_MAX_RSS", why)
	}
	if len(log) != 1 || log[0].Level != logrus.WarnLevel || log[0].Data["message_id"] == nil || log[0].Data["rss_bytes"] != uint64(150) {
		t.Fatalf("log %v, want one warning with the recycle's MESSAGE_ID and the reading", log)
	}
}

// A single reading over the limit (a passing peak) is not a reason.
func TestRSSWatchIgnoresAPeak(t *testing.T) {
	vs := []uint64{50}
	for range 30 {
		vs = append(vs, 150, 50)
	}
	if why, _ := watchFor(t, vs, len(vs), 0, late); why != "" {
		t.Fatalf("sent %q on peaks of one reading", why)
	}
}

// Over the limit right from the start, a worker says the limit is likely
// too low and waits until it has served the settle time.
func TestRSSWatchWaitsForTheSettleTime(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1, 0)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second) // each look at the clock: one more second served
		return now
	}
	why, log := watchFor(t, []uint64{150}, 1000, 10*time.Second, clock)
	if why == "" {
		t.Fatal("never recycled")
	}
	if len(log) != 2 || !strings.Contains(log[0].Message, "the limit is below what a worker needs") {
		t.Fatalf("log %v, want the early warning once, then the recycle", log)
	}
}

func TestRSSWatchLogsAFailedReadOnce(t *testing.T) {
	why, log := watchFor(t, []uint64{0}, 20, 0, late)
	if why != "" || len(log) != 1 || !strings.Contains(log[0].Message, "not enforced") {
		t.Fatalf("sent %q, log %v: want nothing sent and one warning", why, log)
	}
}

// A live heap over the heap limit is memory held, not garbage: the worker
// recycles at the first such reading, before its resident size reaches
// the limit, and lifts the heap limit for its drain.
func TestRSSWatchRecyclesAtOnceWhenTheLiveHeapIsOverItsLimit(t *testing.T) {
	relaxed := false
	why, log := watch(t, &readings{v: []uint64{95}, live: 91}, 1000, 0, late, func() { relaxed = true })
	if !strings.Contains(why, "live heap") || !relaxed {
		t.Fatalf("sent %q, heap limit lifted %v: want the live heap named, and the limit lifted", why, relaxed)
	}
	if len(log) != 1 || log[0].Data["live_heap_bytes"] != uint64(91) {
		t.Fatalf("log %v", log)
	}
}

// Under the unit's memory limit without CLUSTERAPP_MAX_RSS, the live-heap
// rule alone: any resident size passes, a live heap over the heap limit
// derived from the cgroup's does not.
func TestRSSWatchWithoutMaxRSSWatchesTheLiveHeapAlone(t *testing.T) {
	if why, _ := watchWith(t, rssWatch{}, &readings{v: []uint64{1 << 40}, live: 50}, 50, 0, late, nil); why != "" {
		t.Fatalf("sent %q with no CLUSTERAPP_MAX_RSS and the live heap under its limit", why)
	}
	why, _ := watchWith(t, rssWatch{}, &readings{v: []uint64{95}, live: 91}, 50, 0, late, nil)
	if !strings.Contains(why, "below the unit's memory limit") {
		t.Fatalf("sent %q, want the live heap over the limit derived from the unit's", why)
	}
}

// One reading, four times a second in every worker that watches.
func BenchmarkReadMemory(b *testing.B) {
	for b.Loop() {
		if _, err := readMemory(); err != nil {
			b.Fatal(err)
		}
	}
}
