package config

import (
	"strings"
	"testing"
)

func TestParseListen(t *testing.T) {
	for _, tc := range []struct{ in, systemd, goAddr string }{
		{"8080", "8080", ":8080"},
		{"127.0.0.1:8080", "127.0.0.1:8080", "127.0.0.1:8080"},
		{"0.0.0.0:80", "0.0.0.0:80", "0.0.0.0:80"},
		{"[::1]:8080", "[::1]:8080", "[::1]:8080"},
		{"[::]:65535", "[::]:65535", "[::]:65535"},
		{"[fe80::1]:8080%lo", "[fe80::1]:8080%lo", "[fe80::1%lo]:8080"},
		{"[::ffff:127.0.0.1]:80", "[::ffff:127.0.0.1]:80", "[::ffff:127.0.0.1]:80"},
	} {
		l, err := ParseListen(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if l.String() != tc.systemd || l.GoAddr() != tc.goAddr {
			t.Errorf("%q: systemd %q go %q, want %q and %q", tc.in, l.String(), l.GoAddr(), tc.systemd, tc.goAddr)
		}
	}
	for in, want := range map[string]string{
		"localhost:29000":  "not an IP address",
		"%H:29000":         "specifiers such as %H",
		"[::1%lo]:29000":   "a zone goes after the port",
		":8080":            "not an IP address",
		"0":                "not a port from 1 to 65535",
		"08080":            "not a port from 1 to 65535 (written without leading zeros)",
		"65536":            "not a port from 1 to 65535",
		"127.0.0.1":        "no port",
		"127.0.0.1:080":    "not a port",
		"::1:8080":         "goes in brackets",
		"[127.0.0.1]:80":   "goes in brackets",
		"127.0.0.1:80%lo":  "needs an IPv6 address",
		"8080%lo":          "needs an IPv6 address",
		"[::1]:80%":        "not an interface name",
		"[::1]:80%a b":     "not an interface name",
		"/run/x.sock":      "no port",
		"[fe80::1]:80%a%b": "not an interface name",
	} {
		if _, err := ParseListen(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", in, err, want)
		}
	}
}

// Two sockets overlap when the second could not listen beside the first.
func TestListenOverlaps(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"8080", "127.0.0.1:8080", true}, // a port alone takes every address
		{"8080", "[::1]:8080", true},     //
		{"0.0.0.0:8080", "127.0.0.1:8080", true},
		{"[::]:8080", "127.0.0.1:8080", true}, // dual stack, as systemd binds it by default
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"0.0.0.0:8080", "[::1]:8080", false}, // IPv4's every address is not IPv6's
		{"127.0.0.1:8080", "127.0.0.2:8080", false},
		{"127.0.0.1:8080", "[::1]:8080", false},
		{"8080", "9180", false},
		{"0.0.0.0:8080", "127.0.0.1:9180", false},
		{"[fe80::1]:8080%eth0", "[fe80::1]:8080%eth1", false},
		{"[fe80::1]:8080%eth0", "[fe80::1]:8080%eth0", true},
	} {
		a, errA := ParseListen(tc.a)
		b, errB := ParseListen(tc.b)
		if errA != nil || errB != nil {
			t.Fatalf("%s, %s: %v, %v", tc.a, tc.b, errA, errB)
		}
		if got := a.Overlaps(b); got != tc.want || b.Overlaps(a) != got {
			t.Errorf("%s overlaps %s: %v (and the other way %v), want %v", tc.a, tc.b, got, b.Overlaps(a), tc.want)
		}
	}
}

func TestMetricsListenMustNotOverlapListen(t *testing.T) {
	_, err := LoadVars(map[string]string{"CLUSTERAPP_LISTEN": "8080", "CLUSTERAPP_METRICS_LISTEN": "127.0.0.1:8080"})
	if err == nil || !strings.Contains(err.Error(), `CLUSTERAPP_METRICS_LISTEN="127.0.0.1:8080" is invalid`) || !strings.Contains(err.Error(), "overlaps CLUSTERAPP_LISTEN=8080") {
		t.Fatalf("overlapping metrics listener: %v", err)
	}
	if _, err := LoadVars(map[string]string{"CLUSTERAPP_LISTEN": "127.0.0.1:8080", "CLUSTERAPP_METRICS_LISTEN": "127.0.0.2:8080"}); err != nil {
		t.Fatalf("two addresses on one port: %v", err)
	}
}
