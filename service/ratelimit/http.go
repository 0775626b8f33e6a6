package ratelimit

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Observer counts limited requests (the metrics package implements it).
type Observer interface{ Limited() }

// Middleware limits requests by client address, answering 429 with
// Retry-After and RateLimit-* headers (draft-ietf-httpapi-ratelimit-headers).
type Middleware struct {
	Limiter *Limiter
	// Trusted proxies: only a request from one of them has its client taken
	// from X-Forwarded-For (the rightmost address not itself trusted).
	Trusted  []netip.Prefix
	Exempt   map[string]bool
	Observer Observer
}

// Wrap returns next behind the limit.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.Exempt[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		d := m.Limiter.Allow(m.ClientKey(r))
		h := w.Header()
		h.Set("RateLimit-Limit", strconv.Itoa(d.Limit))
		h.Set("RateLimit-Remaining", strconv.Itoa(d.Remaining))
		h.Set("RateLimit-Reset", ceilSeconds(d.Reset))
		if !d.Allowed {
			if m.Observer != nil {
				m.Observer.Limited()
			}
			h.Set("Retry-After", ceilSeconds(d.RetryAfter))
			h.Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":"rate limit exceeded for this client","status":429}` + "\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ClientKey is the address the limit applies to.
func (m *Middleware) ClientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !m.trusted(peer) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // a malformed hop: trust nothing further left
		}
		if !m.trusted(a) {
			return a.Unmap().String()
		}
	}
	return host
}

func (m *Middleware) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range m.Trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func ceilSeconds(d time.Duration) string {
	return strconv.Itoa(int(math.Ceil(d.Seconds())))
}
