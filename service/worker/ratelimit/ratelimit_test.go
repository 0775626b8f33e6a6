package ratelimit

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/sirupsen/logrus"
)

// clock is a fake CLOCK_MONOTONIC, started well after boot.
type clock struct{ t time.Duration }

func (c *clock) now() time.Duration { return c.t }

func newClock() *clock { return &clock{1000 * time.Second} }

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func quiet() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

// otherCell returns a client in another cell of table than key's: with a
// keyed hash any two clients share a cell by chance (1/Slots), which is not
// what tests of separate budgets are about.
func otherCell(t *testing.T, table *Table, key netip.Addr) netip.Addr {
	t.Helper()
	for i := range 256 {
		other := netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})
		if table.slot(other) != table.slot(key) {
			return other
		}
	}
	t.Fatal("256 clients all share one cell")
	return netip.Addr{}
}

func TestBurstThenRate(t *testing.T) {
	c := newClock()
	l := NewLimiter(NewLocal(1024), 10, 5, c.now) // 10/s, burst 5
	for i := range 5 {
		d := l.Allow(addr("192.0.2.1"))
		if !d.Allowed || d.Remaining != 4-i {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	d := l.Allow(addr("192.0.2.1"))
	if d.Allowed || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("6th request: %+v, want refused with retry after 100ms", d)
	}
	if !l.Allow(otherCell(t, l.table.Load(), addr("192.0.2.1"))).Allowed {
		t.Fatal("another client is limited by the first one's budget")
	}
	c.t += 100 * time.Millisecond
	if !l.Allow(addr("192.0.2.1")).Allowed || l.Allow(addr("192.0.2.1")).Allowed {
		t.Fatal("after 100ms exactly one more request is allowed")
	}
	c.t += time.Second
	if d := l.Allow(addr("192.0.2.1")); !d.Allowed || d.Remaining != 4 {
		t.Fatalf("after a full refill: %+v", d)
	}
}

// Two mappings of one file behave as one limiter: this is what keeps N
// workers from multiplying the budget by N. They read one secret, so they
// put every client in the same cell.
func TestSharedTableIsOneBudget(t *testing.T) {
	dir := t.TempDir()
	t1, err := OpenShared(dir, 4096, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	t2, err := OpenShared(dir, 4096, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Close()
	c := newClock()
	workers := []*Limiter{NewLimiter(t1, 1, 20, c.now), NewLimiter(t2, 1, 20, c.now)}
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				if workers[i%2].Allow(addr("10.0.0.1")).Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 20 {
		t.Fatalf("%d requests allowed across two workers, want exactly the burst, 20", allowed.Load())
	}
	fresh := NewLocal(4096)
	differs := false
	for i := range 64 {
		key := netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})
		if t1.slot(key) != t2.slot(key) {
			t.Fatalf("two mappings of one table put %v in cells %d and %d", key, t1.slot(key), t2.slot(key))
		}
		differs = differs || fresh.slot(key) != t1.slot(key)
	}
	if !differs {
		t.Fatal("a table with another secret put 64 clients in the same cells") // 4096^-64 by chance
	}
}

// Targeted collisions: under version 1's unkeyed FNV anyone could compute,
// offline, addresses sharing a victim's cell, and spend the victim's budget
// from them. Colliders computed that way are spread at random by a fresh
// table's secret: each still collides with probability 1/65536, so two or
// more of 8 do with probability below 28/65536^2 < 1e-8.
func TestPrecomputedCollisionsMissUnderTheSecret(t *testing.T) {
	const slots = 65536
	victim := addr("192.0.2.10")
	colliders := fnvColliders(t, victim, slots, 8)
	table := NewLocal(slots)
	hits := 0
	for _, a := range colliders {
		if table.slot(a) == table.slot(victim) {
			hits++
		}
	}
	if hits > 1 {
		t.Fatalf("%d of %d addresses precomputed to share the victim's cell still do under the table's secret", hits, len(colliders))
	}
	// What the attack did: the colliders spend their burst, then the victim
	// asks for the first time.
	c := newClock()
	l := NewLimiter(table, 1, 2, c.now)
	for _, a := range colliders {
		if table.slot(a) == table.slot(victim) {
			continue // the 1-in-65536 chance: not the attack's doing
		}
		for range 3 {
			l.Allow(a)
		}
	}
	if d := l.Allow(victim); !d.Allowed {
		t.Fatalf("the victim was refused after the precomputed colliders spent their budgets: %+v", d)
	}
}

// fnvColliders finds n attacker addresses, each in a /64 of its own (so each
// is a client of its own), whose version-1 cell equals the victim's.
func fnvColliders(t *testing.T, victim netip.Addr, slots, n int) []netip.Addr {
	t.Helper()
	target := fnv1aSlot(victim.String(), slots)
	var found []netip.Addr
	for i := 0; i < 1<<26 && len(found) < n; i++ {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i), 15: 1})
		if fnv1aSlot(a.String(), slots) == target {
			found = append(found, a)
		}
	}
	if len(found) < n {
		t.Fatalf("found only %d colliders", len(found))
	}
	return found
}

// fnv1aSlot is version 1's cell hash: 64-bit FNV-1a of the address text.
func fnv1aSlot(key string, slots int) int {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return int(h % uint64(slots))
}

// Clock: a table holding state from another clock (version 1's wall clock
// stepped back an hour, a corrupted word) holds no client longer than its
// burst. Version 1 answered retry_after=59m58s.
func TestStoredTimeIsBoundedByTheBurst(t *testing.T) {
	c := newClock()
	table := NewLocal(64)
	for i := range table.cells {
		table.cells[i] = uint64(c.t + time.Hour)
	}
	l := NewLimiter(table, 10, 5, c.now) // one request per 100ms, 500ms of burst
	d := l.Allow(addr("192.0.2.1"))
	if d.Allowed || d.RetryAfter > 100*time.Millisecond || d.Reset > 500*time.Millisecond {
		t.Fatalf("a TAT an hour ahead: %+v, want refused for at most one interval (100ms), full again within the burst (500ms)", d)
	}
	c.t += d.RetryAfter
	if d := l.Allow(addr("192.0.2.1")); !d.Allowed {
		t.Fatalf("after the retry-after: %+v", d)
	}
	table.cells[table.slot(addr("192.0.2.2"))] = 1<<64 - 1 // beyond any clock
	if d := l.Allow(addr("192.0.2.2")); d.RetryAfter > 100*time.Millisecond {
		t.Fatalf("a corrupted cell: %+v", d)
	}
}

func TestGuardHeaders(t *testing.T) {
	c := newClock()
	m := &Guard{Limiter: NewLimiter(NewLocal(64), 2, 2, c.now), Exempt: map[string]bool{"/healthz": true}}
	h := m.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var last *httptest.ResponseRecorder
	for range 3 {
		last = httptest.NewRecorder()
		h.ServeHTTP(last, httptest.NewRequest("GET", "/fib", nil))
	}
	if last.Code != 429 || last.Header().Get("Retry-After") != "1" || last.Header().Get("RateLimit-Limit") != "2" || last.Header().Get("RateLimit-Remaining") != "0" {
		t.Fatalf("third request: %d %v", last.Code, last.Header())
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 {
		t.Fatalf("/healthz limited: %d", rec.Code)
	}
	var body struct {
		Error      string `json:"error"`
		Status     int    `json:"status"`
		RetryAfter int    `json:"retry_after_seconds"`
	}
	if err := json.Unmarshal(last.Body.Bytes(), &body); err != nil || body.Status != 429 || body.RetryAfter != 1 ||
		!strings.Contains(body.Error, "rate limit exceeded for this client: 2 requests per second, bursts of 2 (CLUSTERAPP_RATE_LIMIT, CLUSTERAPP_RATE_BURST); retry after 1 s") {
		t.Fatalf("429 body %q (%v): want the limit and when to retry", last.Body, err)
	}
}

// At the slowest refill config accepts (a full burst in
// config.MaxRefillSeconds), the bucket's times still fit in an int64: the
// burst is allowed, the next request waits one interval, and a host up for
// ten years changes nothing. Slower refills wrapped around and refused every
// request.
func TestSlowestRefill(t *testing.T) {
	for _, burst := range []int{1, 20, 1000000} {
		rate := float64(burst) / config.MaxRefillSeconds
		interval := time.Duration(float64(time.Second) / rate)
		for _, uptime := range []time.Duration{time.Second, 10 * 365 * 24 * time.Hour} {
			c := &clock{uptime}
			l := NewLimiter(NewLocal(64), rate, burst, c.now)
			for i := range burst {
				if d := l.Allow(addr("192.0.2.1")); !d.Allowed {
					t.Fatalf("rate %g, uptime %v: request %d of the burst of %d refused: %+v", rate, uptime, i+1, burst, d)
				}
			}
			d := l.Allow(addr("192.0.2.1"))
			if d.Allowed || d.RetryAfter != interval {
				t.Fatalf("rate %g, uptime %v: after the burst of %d: %+v, want refused for %v", rate, uptime, burst, d, interval)
			}
		}
	}
}
