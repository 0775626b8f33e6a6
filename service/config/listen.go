package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ListenAddress is CLUSTERAPP_LISTEN: the TCP address clusterapp.socket
// listens on (its ListenStream=), and the one a standalone worker binds.
//
// It accepts exactly the TCP forms of systemd's ListenStream= (v252's
// socket_address_parse), written the way systemd writes them, so a value
// that passes `clusterapp config --check` can never make the socket unit
// fail to load:
//
//	8080                  a port alone: every address, IPv6 and IPv4
//	127.0.0.1:8080        an IPv4 address and a port
//	[::1]:8080            an IPv6 address in brackets and a port
//	[fe80::1]:8080%eth0   an IPv6 address bound to an interface: systemd
//	                      puts the interface after the port
//
// Host names (localhost:8080), unit specifiers (%H:8080), the Go spelling of
// a zone ([fe80::1%eth0]:8080), empty hosts (:8080), ports with leading
// zeros, and anything with whitespace or control characters are refused:
// systemd refuses some of them (the socket then fails to load and the
// service is down), and reads others in ways the operator did not mean. The
// differential test systemd/listen_diff_test.go checks the claim against the
// real systemd.
type ListenAddress struct {
	// Addr is the address; not valid (the zero Addr) for a port alone.
	Addr netip.Addr
	Port uint16
	// Zone is the interface of an IPv6 address, or empty.
	Zone string
}

// ParseListen parses s in ListenStream= syntax (see ListenAddress).
func ParseListen(s string) (ListenAddress, error) {
	var l ListenAddress
	if i := strings.IndexByte(s, '%'); i >= 0 && i < strings.LastIndexByte(s, ']') {
		return l, fmt.Errorf("a zone goes after the port in ListenStream=: [ADDRESS]:PORT%%IFACE")
	}
	if strings.HasPrefix(s, "%") {
		return l, fmt.Errorf("unit specifiers such as %%H are not accepted: expected an IP address")
	}
	rest, zone, hasZone := strings.Cut(s, "%")
	if hasZone {
		if !validInterfaceName(zone) {
			return l, fmt.Errorf("%q is not an interface name", zone)
		}
		l.Zone = zone
	}
	if port, err := parsePort(rest); err == nil {
		if hasZone {
			return l, fmt.Errorf("an interface needs an IPv6 address: [ADDRESS]:PORT%%%s", zone)
		}
		l.Port = port
		return l, nil
	}
	host, portText, ok := cutLast(rest, ":")
	if !ok {
		if rest != "" && strings.Trim(rest, "0123456789") == "" {
			return l, fmt.Errorf("%q is not a port from 1 to 65535 (written without leading zeros)", rest)
		}
		return l, fmt.Errorf("no port: expected PORT, IPV4:PORT or [IPV6]:PORT")
	}
	port, err := parsePort(portText)
	if err != nil {
		return l, err
	}
	l.Port = port
	v6 := strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]")
	if v6 {
		host = host[1 : len(host)-1]
	}
	addr, err := netip.ParseAddr(host)
	switch {
	case err != nil || addr.Zone() != "":
		return l, fmt.Errorf("%q is not an IP address (host names and specifiers are not accepted; a zone goes after the port: [ADDRESS]:PORT%%IFACE)", host)
	case v6 != addr.Is6():
		return l, fmt.Errorf("an IPv6 address goes in brackets, an IPv4 address does not")
	case hasZone && !v6:
		return l, fmt.Errorf("an interface needs an IPv6 address: [ADDRESS]:PORT%%%s", zone)
	}
	l.Addr = addr
	return l, nil
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 || s[0] == '0' {
		return 0, fmt.Errorf("%q is not a port from 1 to 65535", s)
	}
	return uint16(n), nil
}

// validInterfaceName is the part of systemd's ifname_valid this accepts:
// 1 to 15 of letters, digits, '_', '-' and '.', not "." or "..".
func validInterfaceName(s string) bool {
	if s == "" || len(s) > 15 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_-.", c) >= 0) {
			return false
		}
	}
	return true
}

// String writes the address as ListenStream= takes it. It holds no '%'
// specifier other than the zone's separator: unit files need that one
// doubled (see package unitfile).
func (l ListenAddress) String() string {
	port := strconv.Itoa(int(l.Port))
	switch {
	case !l.Addr.IsValid():
		return port
	case l.Addr.Is4():
		return l.Addr.String() + ":" + port
	case l.Zone != "":
		return "[" + l.Addr.String() + "]:" + port + "%" + l.Zone
	}
	return "[" + l.Addr.String() + "]:" + port
}

// Overlaps reports whether sockets listening on l and o cannot both exist:
// the same port, and the same address or one of them every address of the
// other's family. A port alone and [::] are both families: systemd binds
// them as IPv6 sockets with BindIPv6Only=default, which on Linux's default
// (net.ipv6.bindv6only=0) take IPv4 too; 0.0.0.0 is every IPv4 address.
func (l ListenAddress) Overlaps(o ListenAddress) bool {
	return l.Port == o.Port && (l.covers(o) || o.covers(l))
}

// covers reports whether binding l takes o's address (same port assumed).
func (l ListenAddress) covers(o ListenAddress) bool {
	switch {
	case !l.Addr.IsValid(), l.Addr == netip.IPv6Unspecified():
		return true
	case l.Addr == netip.IPv4Unspecified():
		return o.Addr.Is4()
	}
	return l.Addr == o.Addr && l.Zone == o.Zone
}

// GoAddr is the address in the form net.Listen takes: ":PORT" for every
// address, like systemd's port alone.
func (l ListenAddress) GoAddr() string {
	port := strconv.Itoa(int(l.Port))
	if !l.Addr.IsValid() {
		return ":" + port
	}
	return net.JoinHostPort(l.Addr.WithZone(l.Zone).String(), port)
}

// CheckInterface fails when the address names an interface this host does
// not have: systemd resolves it when it loads the socket unit and refuses
// the unit if it is missing. Call it where the socket unit is made (the
// generator, `config --check`), not in a worker, whose private network
// namespace has no interface but lo.
func (l ListenAddress) CheckInterface() error {
	if l.Zone == "" {
		return nil
	}
	if _, err := net.InterfaceByName(l.Zone); err != nil {
		if _, nerr := strconv.Atoi(l.Zone); nerr == nil {
			return nil // a numeric index; systemd accepts those as they are
		}
		return fmt.Errorf("no network interface %q on this host", l.Zone)
	}
	return nil
}
