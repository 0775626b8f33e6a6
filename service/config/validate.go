package config

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// validate checks what parsing alone does not: ranges, and the listen
// address's syntax. Every duration and count has an upper bound, so no
// value overflows where it is used (a unit's TimeoutStopSec=, a random
// jitter, a buffer).
func (c Config) validate() []Problem {
	var ps []Problem
	check := func(name, value string, ok bool, expected string) {
		key := Prefix + "_" + name
		if raw, set := os.LookupEnv(key); set {
			value = raw // report what the operator wrote, not its parsed form
		}
		if !ok {
			ps = append(ps, Problem{Key: key, Value: value, Expected: expected})
		}
	}
	itoa := strconv.Itoa
	within := func(d, lo, hi time.Duration) bool { return d >= lo && d <= hi }
	const day = 24 * time.Hour
	_, listenErr := ParseListen(c.Listen)
	check("LISTEN", c.Listen, listenErr == nil, "PORT, IPV4:PORT, [IPV6]:PORT or [IPV6]:PORT%IFACE as ListenStream= takes it, such as 127.0.0.1:8080, 8080 or [::1]:8080"+detail(listenErr))
	metrics, metricsErr := ParseListen(c.MetricsListen)
	expected := "PORT, IPV4:PORT, [IPV6]:PORT or [IPV6]:PORT%IFACE as ListenStream= takes it, such as 127.0.0.1:9180"
	if listen, err := ParseListen(c.Listen); metricsErr == nil && err == nil && metrics.Overlaps(listen) {
		metricsErr = fmt.Errorf("port %d overlaps CLUSTERAPP_LISTEN=%s (the same address, or one of them every address): the second socket could not listen; metrics need a port or address of their own", metrics.Port, c.Listen)
	}
	check("METRICS_LISTEN", c.MetricsListen, metricsErr == nil, expected+detail(metricsErr))
	check("BACKLOG", itoa(c.Backlog), c.Backlog >= 1 && c.Backlog <= 1<<20, "a whole number from 1 to 1048576")
	check("WORKERS", itoa(c.Workers), c.Workers >= 0 && c.Workers <= MaxWorkers, fmt.Sprintf("a whole number from 0 (one per CPU) to %d", MaxWorkers))
	check("WATCHDOG_SEC", formatDuration(c.WatchdogSec), within(c.WatchdogSec, time.Second, time.Hour), "a duration from 1s to 1h, such as 10s")
	check("LIMIT_NOFILE", itoa(c.LimitNOFILE), c.LimitNOFILE >= 1024 && c.LimitNOFILE <= 1<<30, "a whole number from 1024 to 1073741824")
	check("MEMORY_HIGH", c.MemoryHigh, validMemory(c.MemoryHigh), "empty (no limit), a size from "+MinMemory+" such as 512M, 1.5G or 2G, or a percentage from 1% to 100% such as 40% or 40.5%"+memoryDetail(c.MemoryHigh))
	check("MEMORY_MAX", c.MemoryMax, validMemory(c.MemoryMax), "empty (no limit), a size from "+MinMemory+" such as 768M, 1.5G or 2G, or a percentage from 1% to 100% such as 50% or 50.5%"+memoryDetail(c.MemoryMax))
	check("FIB_MAX_N", itoa(c.FibMaxN), c.FibMaxN >= 0 && c.FibMaxN <= 60, "a whole number from 0 to 60")
	check("READ_HEADER_TIMEOUT", formatDuration(c.ReadHeaderTimeout), within(c.ReadHeaderTimeout, 1, time.Hour), "a positive duration up to 1h, such as 5s")
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"READ_TIMEOUT", c.ReadTimeout}, {"WRITE_TIMEOUT", c.WriteTimeout}, {"IDLE_TIMEOUT", c.IdleTimeout}, {"KEEPALIVE_TIME", c.KeepAliveTime}} {
		check(d.name, formatDuration(d.value), within(d.value, 0, day), "a duration from 0 to 24h, such as 30s")
	}
	check("MAX_HEADER_BYTES", c.MaxHeaderBytes.String(), c.MaxHeaderBytes >= 1024 && c.MaxHeaderBytes <= 1<<30, "a size from 1KiB to 1GiB, such as 64KiB")
	check("MAX_BODY_BYTES", c.MaxBodyBytes.String(), c.MaxBodyBytes <= 1<<40, "a size from 0 to 1TiB, such as 1MiB")
	check("REQUEST_TIMEOUT", formatDuration(c.RequestTimeout), within(c.RequestTimeout, 1, day), "a positive duration up to 24h, such as 30s")
	check("MAX_IN_FLIGHT", itoa(c.MaxInFlight), c.MaxInFlight >= 0 && c.MaxInFlight <= 1<<16, "a whole number from 0 (GOMAXPROCS) to 65536")
	check("ADMISSION_WAIT", formatDuration(c.AdmissionWait), within(c.AdmissionWait, 0, time.Minute), "a duration from 0 to 1m, such as 50ms")
	check("RATE_LIMIT", strconv.FormatFloat(c.RateLimit, 'g', -1, 64), c.RateLimit == 0 || (c.RateLimit > 0 && c.RateLimit <= 1e6 && float64(c.RateBurst)/c.RateLimit <= MaxRefillSeconds),
		fmt.Sprintf("requests per second from 0 (off) to 1000000, such as 20 or 0.5, refilling a full burst (CLUSTERAPP_RATE_BURST=%d) within 10^9 s (31 years): at least %g", c.RateBurst, float64(c.RateBurst)/MaxRefillSeconds))
	check("RATE_BURST", itoa(c.RateBurst), c.RateBurst >= 1 && c.RateBurst <= 1e6, "a whole number from 1 to 1000000")
	check("RATE_LIMIT_SLOTS", itoa(c.RateLimitSlots), c.RateLimitSlots >= 64 && c.RateLimitSlots <= 1<<24, "a whole number from 64 to 16777216")
	check("RATE_LIMIT_IPV4_PREFIX", itoa(c.RateLimitIPv4Prefix), c.RateLimitIPv4Prefix >= 8 && c.RateLimitIPv4Prefix <= 32, "a prefix length from 8 to 32, such as 32 (one address) or 24")
	check("RATE_LIMIT_IPV6_PREFIX", itoa(c.RateLimitIPv6Prefix), c.RateLimitIPv6Prefix >= 16 && c.RateLimitIPv6Prefix <= 128, "a prefix length from 16 to 128, such as 64 or 56")
	check("TRUSTED_PROXIES", c.TrustedProxies, validPrefixes(c.TrustedProxies), "comma-separated addresses or CIDR prefixes, such as 127.0.0.1,10.0.0.0/8")
	check("CACHE_ENTRIES", itoa(c.CacheEntries), c.CacheEntries >= 0 && c.CacheEntries <= 1<<24, "a whole number from 0 (off) to 16777216")
	check("CACHE_BYTES", c.CacheBytes.String(), c.CacheBytes <= 1<<40, "a size from 0 to 1TiB, such as 16MiB")
	check("CACHE_MAX_AGE", formatDuration(c.CacheMaxAge), within(c.CacheMaxAge, 0, 365*day), "a duration from 0 to 8760h (a year), such as 1m")
	check("BALANCE_MAX_DEFER", formatDuration(c.BalanceMaxDefer), within(c.BalanceMaxDefer, 0, time.Second), "a duration from 0 to 1s, such as 20ms")
	check("KEEPALIVE_REQUESTS", itoa(c.KeepAliveRequests), c.KeepAliveRequests >= 0 && c.KeepAliveRequests <= 1<<30, "a whole number from 0 (unlimited) to 1073741824")
	check("SHUTDOWN_TIMEOUT", formatDuration(c.ShutdownTimeout), within(c.ShutdownTimeout, 1, time.Hour), "a positive duration up to 1h, such as 20s")
	check("DRAIN_IDLE_GRACE", formatDuration(c.DrainIdleGrace), within(c.DrainIdleGrace, 0, time.Hour), "a duration from 0 to 1h, such as 1s")
	check("MAX_REQUESTS", itoa(c.MaxRequests), c.MaxRequests >= 0 && c.MaxRequests <= 1<<40, "a whole number from 0 (no recycling) to 1099511627776")
	check("MAX_REQUESTS_JITTER", itoa(c.MaxRequestsJitter), c.MaxRequestsJitter >= 0 && c.MaxRequestsJitter <= 1<<40, "a whole number from 0 to 1099511627776")
	check("MAX_RSS", c.MaxRSS, c.MaxRSS != "infinity" && validMemory(c.MaxRSS), "empty (never), a size from "+MinMemory+" such as 512M, 1.5G or 2G, or a percentage of the machine's memory from 1% to 100% such as 10% or 10.5%"+rssDetail(c.MaxRSS))
	check("MEMORY_LIMIT_RATIO", strconv.FormatFloat(c.MemoryLimitRatio, 'g', -1, 64), c.MemoryLimitRatio > 0 && c.MemoryLimitRatio <= 1, "a fraction greater than 0 and at most 1, such as 0.9")
	return ps
}

// detail appends why a value was refused, when there is more to say.
func detail(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

// ValidInstance reports whether s may name a worker (`serve --instance`,
// the unit's %i): letters, digits, '.', '_', '-' or '@', at most 64 of them.
func ValidInstance(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r)
		if !ok {
			return false
		}
	}
	return true
}

// formatDuration is time.Duration.String without trailing zero units
// ("1m" rather than "1m0s").
func formatDuration(d time.Duration) string {
	s := d.String()
	for _, z := range []string{"m0s", "h0m"} {
		if strings.HasSuffix(s, z) {
			s = strings.TrimSuffix(s, z[1:])
		}
	}
	return s
}

// ParsePrefixes parses a comma-separated list of addresses or CIDR prefixes
// (CLUSTERAPP_TRUSTED_PROXIES); an address stands for itself alone.
//
// The list is normalized the way the rate limiter sees a peer: an
// IPv4-mapped IPv6 address or prefix (::ffff:10.0.0.1, ::ffff:10.0.0.0/104)
// becomes the IPv4 one, since a mapped peer is judged as IPv4 (written as
// is, it matched no peer at all), and an address's zone (fe80::1%eth0) is
// dropped, since prefixes carry none and a zoned peer is judged without it.
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			a = a.Unmap().WithZone("")
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or CIDR prefix", s)
		}
		if a := p.Addr(); a.Is4In6() {
			if p.Bits() < 96 {
				return nil, fmt.Errorf("%q: an IPv4-mapped prefix needs at least 96 bits (::ffff:0:0/96 is all of IPv4); write IPv4 prefixes as such, e.g. 10.0.0.0/8", s)
			}
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func validPrefixes(list string) bool {
	_, err := ParsePrefixes(list)
	return err == nil
}

// MaxRefillSeconds bounds CLUSTERAPP_RATE_BURST / CLUSTERAPP_RATE_LIMIT, the
// time a client's full burst takes to come back. The limiter keeps a bucket
// in nanoseconds on an int64 clock (292 years in all, shared with the time
// since boot): a slower refill (RATE_LIMIT=1e-12, or 0.0001 with a burst of
// 1000000) wrapped around, and every request was answered 429 with a negative
// or absurd Retry-After, while config --check passed the value.
const MaxRefillSeconds = 1e9
