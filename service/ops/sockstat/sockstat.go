// Package sockstat reads the kernel's view of listening TCP sockets and of
// the listen-queue counters, from /proc/net, without netlink.
//
// For a socket in LISTEN state, the rx_queue column of /proc/net/tcp and
// /proc/net/tcp6 is the number of established connections waiting in the
// accept queue right now (sk_ack_backlog, what `ss -lt` prints as Recv-Q).
// The queue's limit (sk_max_ack_backlog, `ss`'s Send-Q) is NOT there:
// tx_queue stays the send-queue byte count, 0 for a listener (measured in
// the sandbox; get_tcp4_sock and get_tcp6_sock only special-case rx_queue).
// Only NETLINK_SOCK_DIAG reports the limit. We read the text files anyway:
// they need no privilege and no netlink code, their format has been stable
// since Linux 2.6, and the limit is knowable without them (the socket's
// Backlog= capped by net.core.somaxconn when it started listening). The cost
// is a linear scan, fine for an operator command.
//
// The files describe the network namespace of the reading process: run the
// command in the namespace systemd bound the socket in (normally the host's).
//
// /proc/net/netstat carries the cumulative TcpExt counters ListenOverflows
// (a connection completed the handshake but the accept queue was full) and
// ListenDrops (every SYN or ACK dropped on a listening socket, overflows
// included).
//
// Parsing is pure (Parse* take the text); the Read* functions add the I/O.
package sockstat

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// tcpListen is the st column value of a socket in LISTEN state.
const tcpListen = "0A"

// Listener is one listening TCP socket.
type Listener struct {
	Addr netip.AddrPort
	// Queued is the number of connections waiting to be accepted (rx_queue).
	Queued int
	Inode  uint64
}

// ParseTCP returns the LISTEN sockets in the text of /proc/net/tcp or
// /proc/net/tcp6. Other states are skipped; a malformed LISTEN line is an
// error naming it.
func ParseTCP(text string) ([]Listener, error) {
	var out []Listener
	for i, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 10 || f[3] != tcpListen {
			continue
		}
		l, err := parseListenLine(f)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", i+1, strings.TrimSpace(line), err)
		}
		out = append(out, l)
	}
	return out, nil
}

func parseListenLine(f []string) (Listener, error) {
	addr, err := parseAddrPort(f[1])
	if err != nil {
		return Listener{}, err
	}
	_, rx, ok := strings.Cut(f[4], ":")
	if !ok {
		return Listener{}, fmt.Errorf("queue column %q is not tx:rx", f[4])
	}
	queued, err2 := strconv.ParseUint(rx, 16, 32)
	inode, err3 := strconv.ParseUint(f[9], 10, 64)
	if err2 != nil || err3 != nil {
		return Listener{}, fmt.Errorf("bad queue %q or inode %q", f[4], f[9])
	}
	return Listener{Addr: addr, Queued: int(queued), Inode: inode}, nil
}

// parseAddrPort decodes "0100007F:1F90": the address as 32-bit words in
// the kernel's (little-endian here) byte order, the port big-endian hex.
func parseAddrPort(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	raw, herr := hex.DecodeString(a)
	if !ok || err != nil || herr != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr, uint16(port)), nil
}

// ParseNetstat returns the counters of one section ("TcpExt") of
// /proc/net/netstat, which alternates a header line and a value line.
func ParseNetstat(text, section string) (map[string]uint64, error) {
	lines := strings.Split(text, "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != section+":" || len(values) == 0 || values[0] != section+":" {
			continue
		}
		if len(names) != len(values) {
			return nil, fmt.Errorf("%s: %d names but %d values", section, len(names), len(values))
		}
		out := make(map[string]uint64, len(names)-1)
		for j := 1; j < len(names); j++ {
			v, err := strconv.ParseUint(values[j], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", section, names[j], err)
			}
			out[names[j]] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("no %s section", section)
}

// ReadListeners returns the LISTEN sockets of /proc/net/tcp and tcp6.
// A missing tcp6 (IPv6 disabled) is not an error.
func ReadListeners() ([]Listener, error) {
	var all []Listener
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) && path == "/proc/net/tcp6" {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read listening sockets: %w", err)
		}
		ls, err := ParseTCP(string(b))
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		all = append(all, ls...)
	}
	return all, nil
}

// OnPort returns the listeners bound to port.
func OnPort(ls []Listener, port uint16) []Listener {
	var out []Listener
	for _, l := range ls {
		if l.Addr.Port() == port {
			out = append(out, l)
		}
	}
	return out
}

// ListenCounters is the pair of TcpExt counters about listen queues.
type ListenCounters struct {
	Overflows uint64 // ListenOverflows: accept queue full
	Drops     uint64 // ListenDrops: dropped on a listening socket, overflows included
}

// ReadListenCounters reads ListenOverflows and ListenDrops from /proc/net/netstat.
func ReadListenCounters() (ListenCounters, error) {
	b, err := os.ReadFile("/proc/net/netstat")
	if err != nil {
		return ListenCounters{}, fmt.Errorf("read listen counters: %w", err)
	}
	m, err := ParseNetstat(string(b), "TcpExt")
	if err != nil {
		return ListenCounters{}, fmt.Errorf("parse /proc/net/netstat: %w", err)
	}
	return ListenCounters{Overflows: m["ListenOverflows"], Drops: m["ListenDrops"]}, nil
}
