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

// Observer counts refused requests (the metrics package implements it).
type Observer interface {
	// Limited counts a request refused by the limit (429).
	Limited()
	// LimitUnavailable counts a request refused because the limiter has no
	// table (503, FallbackClosed).
	LimitUnavailable()
}

// Guard limits requests by client, answering 429 with Retry-After and
// RateLimit-* headers (draft-ietf-httpapi-ratelimit-headers).
type Guard struct {
	Limiter *Limiter
	// Trusted proxies: only a request from one of them has its client taken
	// from X-Forwarded-For (the rightmost address not itself trusted).
	Trusted []netip.Prefix
	// IPv4Prefix is how many leading bits of an IPv4 client address make its
	// key. Default 32: one budget per address.
	IPv4Prefix int
	// IPv6Prefix is the same for IPv6. Default 64: one budget per /64, the
	// block one host usually holds, so rotating addresses in it gains nothing.
	IPv6Prefix int
	Exempt     map[string]bool
	Observer   Observer
}

// Middleware returns next behind the limit (the suite's one middleware shape,
// func(http.Handler) http.Handler).
func (m *Guard) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.Exempt[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		d := m.Limiter.Allow(m.ClientKey(r))
		if d.Unavailable {
			m.unavailable(w)
			return
		}
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
			retry := ceilSeconds(d.RetryAfter)
			_, _ = w.Write([]byte(`{"error":"rate limit exceeded for this client: ` + m.limit() + `; retry after ` + retry + ` s","status":429,"retry_after_seconds":` + retry + "}\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limit describes the limit for a 429's message (no quotes or escapes in it).
func (m *Guard) limit() string {
	return strconv.FormatFloat(m.Limiter.Rate(), 'g', -1, 64) + " requests per second, bursts of " + strconv.Itoa(m.Limiter.Burst()) +
		" (CLUSTERAPP_RATE_LIMIT, CLUSTERAPP_RATE_BURST)"
}

// unavailable answers a request the limiter cannot judge: the operator chose
// to refuse rather than to limit on a table of this worker's own.
func (m *Guard) unavailable(w http.ResponseWriter) {
	if m.Observer != nil {
		m.Observer.LimitUnavailable()
	}
	h := w.Header()
	h.Set("Retry-After", ceilSeconds(UnavailableRetryAfter))
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(`{"error":"the shared rate-limit table is unavailable, so rate-limited routes are refused (CLUSTERAPP_RATE_LIMIT_FALLBACK=closed)","status":503}` + "\n"))
}

// ClientKey is what the limit applies to: the client's address masked to
// IPv4Prefix or IPv6Prefix (an IPv4-mapped IPv6 address counts as IPv4),
// the zero Addr when the peer's address cannot be parsed.
func (m *Guard) ClientKey(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	if !m.trusted(peer) {
		return m.mask(peer)
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			break // a malformed hop: trust nothing further left
		}
		if !m.trusted(a) {
			return m.mask(a)
		}
	}
	return m.mask(peer)
}

// parseHop reads one X-Forwarded-For entry: an address, ip:port, [v6]:port
// or [v6] (proxies that copy their peer's address with its port).
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a, true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		a, err := netip.ParseAddr(s[1 : len(s)-1])
		return a, err == nil && a.Is6()
	}
	ap, err := netip.ParseAddrPort(s)
	return ap.Addr(), err == nil
}

func (m *Guard) mask(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	bits := m.IPv6Prefix
	if bits == 0 {
		bits = 64
	}
	if a.Is4() {
		bits = m.IPv4Prefix
		if bits == 0 {
			bits = 32
		}
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return a // bits out of range: config.Load rejects that; keep the whole address
	}
	return p.Addr()
}

// trusted reports whether a is a trusted proxy. A mapped address is judged
// as IPv4 and a zone is dropped (fe80::1%eth0 is in fe80::/10), the same
// normalization config.ParsePrefixes applies to the list.
func (m *Guard) trusted(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
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
