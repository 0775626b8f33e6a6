package ratelimit

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/clusterapp/clusterapp/service/config"
)

func TestClientKey(t *testing.T) {
	m := &Guard{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	for _, tc := range []struct{ remote, xff, want string }{
		{"192.0.2.1:5000", "", "192.0.2.1"},
		{"192.0.2.1:5000", "203.0.113.9", "192.0.2.1"},                           // untrusted peer: header ignored
		{"127.0.0.1:5000", "203.0.113.9", "203.0.113.9"},                         // nginx in front
		{"127.0.0.1:5000", "198.51.100.7, 203.0.113.9, 10.1.2.3", "203.0.113.9"}, // rightmost untrusted hop
		{"127.0.0.1:5000", "", "127.0.0.1"},
		{"127.0.0.1:5000", "garbage", "127.0.0.1"},
		// Hops with ports, as some proxies and load balancers write them.
		{"127.0.0.1:5000", "198.51.100.1:80", "198.51.100.1"},
		{"127.0.0.1:5000", "198.51.100.1:80, 10.1.2.3:8080", "198.51.100.1"},
		{"127.0.0.1:5000", "[2001:db8::7]:443", "2001:db8::"},
		{"127.0.0.1:5000", "[2001:db8::7]", "2001:db8::"},
		{"[::1]:5000", " 2001:db8:0:1::7 ", "2001:db8:0:1::"},
		{"127.0.0.1:5000", "[::ffff:198.51.100.1]:80", "198.51.100.1"},
		// Malformed hops: trust nothing further left.
		{"127.0.0.1:5000", "198.51.100.1:", "127.0.0.1"},
		{"127.0.0.1:5000", "198.51.100.1:http", "127.0.0.1"},
		{"127.0.0.1:5000", "[2001:db8::7]:99999", "127.0.0.1"},
		{"127.0.0.1:5000", "[198.51.100.1]", "127.0.0.1"},
		{"127.0.0.1:5000", "203.0.113.9, [2001:db8::7", "127.0.0.1"},
		// IPv6 clients by /64 by default; IPv4-mapped ones are IPv4.
		{"[2001:db8:1:2:3:4:5:6]:5000", "", "2001:db8:1:2::"},
		{"[::ffff:192.0.2.1]:5000", "", "192.0.2.1"},
		{"[fe80::1%eth0]:5000", "", "fe80::"},
		{"@", "", "invalid IP"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := m.ClientKey(r).String(); got != tc.want {
			t.Errorf("remote %s XFF %q: key %q, want %q", tc.remote, tc.xff, got, tc.want)
		}
	}
}

// A link-local proxy's peer address carries its zone, and an operator may
// write a proxy as an IPv4-mapped address: both are trusted as listed.
func TestTrustedZonedAndMappedProxies(t *testing.T) {
	list, err := config.ParsePrefixes("fe80::/10, ::ffff:10.9.8.7, fe80::2%eth1")
	if err != nil {
		t.Fatal(err)
	}
	m := &Guard{Trusted: list}
	for _, tc := range []struct{ remote, want string }{
		{"[fe80::1%eth0]:5000", "203.0.113.9"},
		{"[fe80::2%eth1]:5000", "203.0.113.9"},
		{"10.9.8.7:5000", "203.0.113.9"},
		{"[::ffff:10.9.8.7]:5000", "203.0.113.9"},
		{"10.9.8.6:5000", "10.9.8.6"}, // not listed: the header is ignored
		{"[2001:db8::1]:5000", "2001:db8::"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		if got := m.ClientKey(r).String(); got != tc.want {
			t.Errorf("peer %s: key %q, want %q", tc.remote, got, tc.want)
		}
	}
}

func TestPrefixOptions(t *testing.T) {
	m := &Guard{IPv4Prefix: 24, IPv6Prefix: 56}
	for _, tc := range []struct{ remote, want string }{
		{"192.0.2.77:1", "192.0.2.0"},
		{"[::ffff:192.0.2.77]:1", "192.0.2.0"},
		{"[2001:db8:0:ff:1::1]:1", "2001:db8::"},
		{"[2001:db8:0:100::1]:1", "2001:db8:0:100::"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if got := m.ClientKey(r).String(); got != tc.want {
			t.Errorf("remote %s with /24 and /56: key %q, want %q", tc.remote, got, tc.want)
		}
	}
	m = &Guard{IPv6Prefix: 128}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8::1:2]:1"
	if got := m.ClientKey(r).String(); got != "2001:db8::1:2" {
		t.Errorf("with /128: key %q, want the whole address", got)
	}
}

// A client rotating addresses inside its /64 gets one budget, not one per
// address; a neighbouring /64 is another client.
func TestRotatingIPv6AddressesShareOneBudget(t *testing.T) {
	c := newClock()
	m := &Guard{Limiter: NewLimiter(NewLocal(4096), 1, 5, c.now)}
	h := m.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	allowed := 0
	for i := range 50 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = netip.AddrPortFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i) + 1}), 40000).String()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code == 200 {
			allowed++
		}
	}
	if allowed != 5 {
		t.Fatalf("50 addresses of one /64 got %d requests through, want the burst, 5", allowed)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8:0:1::1]:40000"
	if m.ClientKey(r) == addr("2001:db8::") {
		t.Fatal("a neighbouring /64 has the first one's key")
	}
}
