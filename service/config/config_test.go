package config

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLoadDefaults(t *testing.T) {
	c, err := LoadVars(nil)
	if err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.Listen != "127.0.0.1:8080" || c.FibMaxN != 45 || c.ShutdownTimeout != 20*time.Second ||
		c.MaxHeaderBytes != 64<<10 || c.LogFormat != "text" || c.LogLevel.String() != "info" || c.DebugEndpoints {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

func TestLoadGoodValues(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		check      func(Config) bool
	}{
		{"CLUSTERAPP_SHUTDOWN_TIMEOUT", "1m30s", func(c Config) bool { return c.ShutdownTimeout == 90*time.Second }},
		{"CLUSTERAPP_MAX_BODY_BYTES", "2MiB", func(c Config) bool { return c.MaxBodyBytes == 2<<20 }},
		{"CLUSTERAPP_MAX_BODY_BYTES", "0", func(c Config) bool { return c.MaxBodyBytes == 0 }},
		{"CLUSTERAPP_MAX_HEADER_BYTES", "8192", func(c Config) bool { return c.MaxHeaderBytes == 8192 }},
		{"CLUSTERAPP_LOG_LEVEL", "DEBUG", func(c Config) bool { return c.LogLevel.String() == "debug" }},
		{"CLUSTERAPP_LOG_FORMAT", "json", func(c Config) bool { return c.LogFormat == "json" }},
		{"CLUSTERAPP_WORKER_HEADER", "Every", func(c Config) bool { return c.WorkerHeader == WorkerHeaderEvery }},
		{"CLUSTERAPP_WORKER_HEADER", "off", func(c Config) bool { return c.WorkerHeader == WorkerHeaderOff }},
		{"CLUSTERAPP_WORKER_HEADER", "", func(c Config) bool { return c.WorkerHeader == WorkerHeaderConnection }},
		{"CLUSTERAPP_LISTEN", "[::1]:9000", func(c Config) bool { return c.Listen == "[::1]:9000" }},
		{"CLUSTERAPP_LISTEN", "8080", func(c Config) bool { return c.Listen == "8080" }},
		{"CLUSTERAPP_WORKERS", "", func(c Config) bool { return c.Workers == 0 }}, // KEY= means the default
		{"CLUSTERAPP_SHUTDOWN_TIMEOUT", "", func(c Config) bool { return c.ShutdownTimeout == 20*time.Second }},
		{"CLUSTERAPP_SHUTDOWN_TIMEOUT", "1h", func(c Config) bool { return c.ShutdownTimeout == time.Hour }},
		{"CLUSTERAPP_MAX_REQUESTS_JITTER", "1000000", func(c Config) bool { return c.MaxRequestsJitter == 1e6 }},
		{"CLUSTERAPP_WORKERS", "3", func(c Config) bool { return c.Workers == 3 }},
		{"CLUSTERAPP_DEBUG_ENDPOINTS", "true", func(c Config) bool { return c.DebugEndpoints }},
		{"CLUSTERAPP_MEMORY_LIMIT_RATIO", "1", func(c Config) bool { return c.MemoryLimitRatio == 1 }},
		{"CLUSTERAPP_MEMORY_MAX", "768M", func(c Config) bool { return c.MemoryMax == "768M" }},
		{"CLUSTERAPP_MEMORY_HIGH", "40%", func(c Config) bool { return c.MemoryHigh == "40%" }},
		{"CLUSTERAPP_WATCHDOG_SEC", "2s", func(c Config) bool { return c.WatchdogSec == 2*time.Second }},
		{"CLUSTERAPP_TRUSTED_PROXIES", "127.0.0.1,10.0.0.0/8", func(c Config) bool { p, err := ParsePrefixes(c.TrustedProxies); return err == nil && len(p) == 2 }},
		{"CLUSTERAPP_RATE_LIMIT", "0.5", func(c Config) bool { return c.RateLimit == 0.5 }},
		{"CLUSTERAPP_RATE_LIMIT", "1e3", func(c Config) bool { return c.RateLimit == 1000 }},
		{"CLUSTERAPP_RATE_LIMIT", ".5", func(c Config) bool { return c.RateLimit == 0.5 }},
		{"CLUSTERAPP_RATE_LIMIT", "0.0005", func(c Config) bool { return c.RateLimit == 0.0005 }},
		{"CLUSTERAPP_WORKERS", "+2", func(c Config) bool { return c.Workers == 2 }},
		{"CLUSTERAPP_WORKERS", "0", func(c Config) bool { return c.Workers == 0 }},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.key, tc.value)
			c, err := Load()
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !tc.check(c) {
				t.Fatalf("%s=%s not applied: %+v", tc.key, tc.value, c)
			}
		})
	}
}

func TestLoadBadValues(t *testing.T) {
	for _, tc := range []struct{ key, value, expected string }{
		{"CLUSTERAPP_SHUTDOWN_TIMEOUT", "abc", "a duration"},
		{"CLUSTERAPP_SHUTDOWN_TIMEOUT", "0s", "a positive duration"},
		{"CLUSTERAPP_MAX_BODY_BYTES", "-1", "a size of 0 or more bytes"},
		{"CLUSTERAPP_MAX_HEADER_BYTES", "12XB", "a size"},
		{"CLUSTERAPP_MAX_HEADER_BYTES", "100", "from 1KiB"},
		{"CLUSTERAPP_LOG_LEVEL", "verbose", "one of trace, debug, info, warn, error"},
		{"CLUSTERAPP_LOG_FORMAT", "xml", "text or json"},
		{"CLUSTERAPP_WORKER_HEADER", "always", "connection, every or off"},
		{"CLUSTERAPP_LISTEN", "127.0.0.1:99999", "not a port from 1 to 65535"},
		{"CLUSTERAPP_LISTEN", "localhost:29000", `"localhost" is not an IP address`},
		{"CLUSTERAPP_LISTEN", "%H:29000", "specifiers such as %H are not accepted"},
		{"CLUSTERAPP_LISTEN", "[::1%lo]:29000", "a zone goes after the port"},
		{"CLUSTERAPP_LISTEN", "29001\rExecStartPre=/bin/sh -c 'id > /tmp/x'\rListenStream=127.0.0.1:29000", `without control characters`},
		{"CLUSTERAPP_WORKERS", "-2", "from 0 (one per CPU) to 1024"},
		{"CLUSTERAPP_WORKERS", "two", "a whole number"},
		{"CLUSTERAPP_FIB_MAX_N", "100", "from 0 to 60"},
		{"CLUSTERAPP_MAX_REQUESTS", "-5", "from 0 (no recycling)"},
		{"CLUSTERAPP_MAX_REQUESTS_JITTER", "9223372036854775807", "from 0 to 1099511627776"},
		{"CLUSTERAPP_SHUTDOWN_TIMEOUT", "2562047h", "up to 1h"},
		{"CLUSTERAPP_DEBUG_ENDPOINTS", "maybe", "1, yes, y, true, t or on; 0, no, n, false, f or off"},
		{"CLUSTERAPP_MEMORY_LIMIT_RATIO", "1.5", "at most 1"},
		{"CLUSTERAPP_READ_HEADER_TIMEOUT", "0", "a positive duration"},
		{"CLUSTERAPP_WATCHDOG_SEC", "100ms", "from 1s to 1h"},
		{"CLUSTERAPP_TRUSTED_PROXIES", "10.0.0.0/33", "CIDR prefixes"},
		{"CLUSTERAPP_TRUSTED_PROXIES", "::ffff:0:0/80", "CIDR prefixes"},
		{"CLUSTERAPP_RATE_LIMIT", "-1", "from 0 (off)"},
		{"CLUSTERAPP_RATE_LIMIT", "1e-12", "refilling a full burst (CLUSTERAPP_RATE_BURST=20) within 10^9 s (31 years): at least 2e-08"},
		{"CLUSTERAPP_REQUEST_TIMEOUT", "0s", "a positive duration"},
		{"CLUSTERAPP_LIMIT_NOFILE", "10", "from 1024"},
		{"CLUSTERAPP_MEMORY_MAX", "lots", "a size from 32M such as"},
		{"CLUSTERAPP_MEMORY_HIGH", "150%", "a percentage"},
		// systemd takes these, and a worker cannot run under them.
		{"CLUSTERAPP_MEMORY_MAX", "0", "systemd ignores 0 and applies no limit"},
		{"CLUSTERAPP_MEMORY_MAX", "0%", "systemd ignores 0"},
		{"CLUSTERAPP_MEMORY_HIGH", "00%", "systemd ignores 0"},
		{"CLUSTERAPP_MEMORY_MAX", "16M", "a worker holds 17-24 MiB: below 32M"},
		{"CLUSTERAPP_MEMORY_HIGH", "32767K", "below 32M"},
		{"CLUSTERAPP_MEMORY_MAX", "33554431", "below 32M"},
		{"CLUSTERAPP_MEMORY_MAX", "31.99M", "below 32M"},
		{"CLUSTERAPP_MEMORY_MAX", "0.0G", "systemd ignores 0 and applies no limit"},
		{"CLUSTERAPP_MEMORY_HIGH", "0.5%", "below 1%"},
		{"CLUSTERAPP_MEMORY_MAX", "1.5 G", "without control characters, whitespace"},
		{"CLUSTERAPP_MEMORY_MAX", "16E", "a size from 32M such as"},
		{"CLUSTERAPP_MEMORY_MAX", "1M1G", "a size from 32M such as"},
		// Go's other bases and separators: the file says 10, 24, 1024.
		{"CLUSTERAPP_WORKERS", "010", "a whole number in decimal digits"},
		{"CLUSTERAPP_RATE_LIMIT_IPV4_PREFIX", "024", "without a leading zero"},
		{"CLUSTERAPP_BACKLOG", "0x400", "a base prefix"},
		{"CLUSTERAPP_MAX_REQUESTS", "1_000", "an underscore"},
		{"CLUSTERAPP_RATE_LIMIT", "0x1p3", "a decimal number"},
		{"CLUSTERAPP_MEMORY_LIMIT_RATIO", "0x1p-1", "a decimal number"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.key, tc.value)
			_, err := Load()
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) != 1 {
				t.Fatalf("want one problem, got %v", err)
			}
			msg := err.Error()
			for _, want := range []string{tc.key, strconv.Quote(tc.value), tc.expected} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans several lines: %q", msg)
			}
		})
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	_, err := LoadVars(map[string]string{
		"CLUSTERAPP_SHUTDOWN_TIMEOUT": "abc",
		"CLUSTERAPP_LOG_LEVEL":        "loud",
		"CLUSTERAPP_FIB_MAX_N":        "99",
	})
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 3 {
		t.Fatalf("want 3 problems, got %v", err)
	}
	// declaration order, so the output is stable
	got := []string{ce.Problems[0].Key, ce.Problems[1].Key, ce.Problems[2].Key}
	want := []string{"CLUSTERAPP_FIB_MAX_N", "CLUSTERAPP_SHUTDOWN_TIMEOUT", "CLUSTERAPP_LOG_LEVEL"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("problems in order %v, want %v", got, want)
	}
}

// envconfig falls back to a variable's name without the prefix; only
// CLUSTERAPP_* names are settings, from the environment or from a file,
// and the bare ones are left as they were.
func TestBareNamesAreNotSettings(t *testing.T) {
	bare := map[string]string{"LISTEN": "0.0.0.0:9999", "DEBUG_ENDPOINTS": "true", "BACKLOG": "abc", "WORKERS": "7"}
	for k, v := range bare {
		t.Setenv(k, v)
	}
	check := func(how string, c Config, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if c.Listen != "127.0.0.1:8080" || c.DebugEndpoints || c.Backlog != 4096 || c.Workers != 0 {
			t.Errorf("%s read a bare name: listen %s, debug endpoints %v, backlog %d, workers %d", how, c.Listen, c.DebugEndpoints, c.Backlog, c.Workers)
		}
	}
	c, err := Load()
	check("Load", c, err)
	c, err = LoadVars(map[string]string{"LISTEN": "0.0.0.0:9998", "CLUSTERAPP_FIB_MAX_N": "30"})
	check("LoadVars", c, err)
	if c.FibMaxN != 30 {
		t.Errorf("LoadVars: FIB_MAX_N %d, want 30", c.FibMaxN)
	}
	for k, v := range bare {
		if got := os.Getenv(k); got != v {
			t.Errorf("%s is %q after loading, want %q", k, got, v)
		}
	}
}

func TestUnknownNamesSettingsNotRead(t *testing.T) {
	got := strings.Join(Unknown([]string{"LISTEN", "clusterapp_workers", "Clusterapp_Nope", "CLUSTERAPP_WORKER", "PATH", "CLUSTERAPP_LISTEN"}), "\n")
	for _, want := range []string{
		"LISTEN is not read: the setting is CLUSTERAPP_LISTEN",
		"clusterapp_workers is not read: names are upper case (did you mean CLUSTERAPP_WORKERS?)",
		"Clusterapp_Nope is not read: names are upper case",
		"unknown variable CLUSTERAPP_WORKER (did you mean CLUSTERAPP_WORKERS?)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Unknown does not say %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "PATH") || strings.Count(got, "\n") != 3 {
		t.Errorf("Unknown names more than the four:\n%s", got)
	}
}

func TestLoadVarsRestoresEnvironment(t *testing.T) {
	t.Setenv("CLUSTERAPP_FIB_MAX_N", "30")
	if c, err := LoadVars(map[string]string{"CLUSTERAPP_FIB_MAX_N": "20"}); err != nil || c.FibMaxN != 20 {
		t.Fatalf("LoadVars = %+v, %v", c, err)
	}
	if c, err := Load(); err != nil || c.FibMaxN != 30 {
		t.Fatalf("environment not restored: %+v, %v", c, err)
	}
}

func TestSizeString(t *testing.T) {
	for in, want := range map[Size]string{0: "0", 1000: "1000", 1024: "1KiB", 64 << 10: "64KiB", 1 << 20: "1MiB", 3 << 30: "3GiB"} {
		if got := in.String(); got != want {
			t.Errorf("Size(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestEveryVarDocumented(t *testing.T) {
	c, _ := LoadVars(nil)
	for _, v := range Vars() {
		if v.Description == "" {
			t.Errorf("%s has no description", v.Key)
		}
		if v.Default != "" && c.Value(v) != v.Default {
			t.Errorf("%s: default %q reads back as %q", v.Key, v.Default, c.Value(v))
		}
	}
}

// No variable takes control characters or whitespace: a carriage return in
// a value that reaches a unit file is a new directive there (issue 11).
func TestEveryVarRefusesControlCharacters(t *testing.T) {
	for _, v := range Vars() {
		for _, bad := range []string{"1\r2", "1\n2", "a b", "\t1", "1\x7f", "\xff"} {
			c, err := LoadVars(map[string]string{v.Key: bad})
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Key != v.Key || !strings.Contains(err.Error(), "without control characters") {
				t.Errorf("%s=%q: %v", v.Key, bad, err)
				continue
			}
			if got := c.Value(v); got != v.Default && !(v.Default == "0" && got == "0") {
				t.Errorf("%s=%q: the Config holds %q, not the default %q", v.Key, bad, got, v.Default)
			}
		}
	}
}

// An invalid variable falls back to its default in the returned Config, for
// that variable alone; the problem carries the variable's scope.
func TestInvalidFallsBackAlone(t *testing.T) {
	c, err := LoadVars(map[string]string{
		"CLUSTERAPP_WORKERS":          "many",
		"CLUSTERAPP_WATCHDOG_SEC":     "100ms",
		"CLUSTERAPP_BACKLOG":          "512",
		"CLUSTERAPP_LISTEN":           "localhost:1",
		"CLUSTERAPP_SHUTDOWN_TIMEOUT": "5s",
		"CLUSTERAPP_FIB_MAX_N":        "99",
	})
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 4 {
		t.Fatalf("want 4 problems, got %v", err)
	}
	if c.Workers != 0 || c.WatchdogSec != 10*time.Second || c.Listen != "127.0.0.1:8080" || c.FibMaxN != 45 {
		t.Errorf("invalid values not replaced by their defaults: %+v", c)
	}
	if c.Backlog != 512 || c.ShutdownTimeout != 5*time.Second {
		t.Errorf("valid values lost: %+v", c)
	}
	scopes := map[string]Scope{}
	for _, p := range ce.Problems {
		scopes[p.Key] = p.Scope
	}
	want := map[string]Scope{"CLUSTERAPP_WORKERS": ScopeUnits, "CLUSTERAPP_WATCHDOG_SEC": ScopeUnits, "CLUSTERAPP_LISTEN": ScopeListen, "CLUSTERAPP_FIB_MAX_N": ScopeWorker}
	for k, s := range want {
		if scopes[k] != s {
			t.Errorf("%s: scope %q, want %q", k, scopes[k], s)
		}
	}
	if only := ce.Only(ScopeWorker, ScopeBoth); only == nil || len(only.Problems) != 1 || only.Problems[0].Key != "CLUSTERAPP_FIB_MAX_N" {
		t.Errorf("Only(worker, both) = %v", only)
	}
}

// The floor lets through every size from 32M, however written, and every
// percentage from 1%: what operators use.
func TestMemoryFloorKeepsUsableValues(t *testing.T) {
	for _, v := range []string{"", "infinity", "32M", "32768K", "33554432", "1G", "2T", "1%", "40%", "100%",
		"1.5G", "0.03125G", "1G512M", "33554432B", "1E", "40.5%", "1.05%", "99.99%"} {
		if !validMemory(v) {
			t.Errorf("%q refused", v)
		}
	}
}

// The slowest rate depends on the burst: a full burst must come back within
// MaxRefillSeconds, the most the limiter's int64 nanoseconds can hold.
func TestRateLimitRefillBound(t *testing.T) {
	for _, tc := range []struct {
		rate, burst string
		ok          bool
	}{
		{"0.0005", "20", true},
		{"0.001", "1000000", true},
		{"0.0001", "1000000", false},
		{"1e-9", "1", true},
		{"1e-12", "1", false},
	} {
		t.Setenv("CLUSTERAPP_RATE_LIMIT", tc.rate)
		t.Setenv("CLUSTERAPP_RATE_BURST", tc.burst)
		_, err := Load()
		if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "CLUSTERAPP_RATE_LIMIT=")) {
			t.Errorf("RATE_LIMIT=%s RATE_BURST=%s: %v, want accepted %v", tc.rate, tc.burst, err, tc.ok)
		}
	}
}

// The trusted list is normalized as the rate limiter judges a peer: mapped
// IPv4 is IPv4 and a zone is dropped. Written as is, these entries matched
// no peer at all.
func TestTrustedProxiesNormalized(t *testing.T) {
	got, err := ParsePrefixes(" ::ffff:10.0.0.1, ::ffff:192.168.0.0/112,fe80::1%eth0, fe80::/10, 2001:db8::1/64, 127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.1/32", "192.168.0.0/16", "fe80::1/128", "fe80::/10", "2001:db8::/64", "127.0.0.1/32"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d: %v, want %s", i, got[i], want[i])
		}
	}
	if _, err := ParsePrefixes("::ffff:0:0/95"); err == nil || !strings.Contains(err.Error(), "at least 96 bits") {
		t.Errorf("a mapped prefix shorter than /96: err %v, want it refused", err)
	}
}
