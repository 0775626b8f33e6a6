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
		"0":                "no port",
		"08080":            "no port",
		"65536":            "no port",
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
