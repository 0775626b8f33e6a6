// Package acceptq reads a listening TCP socket's accept queue from the
// kernel: how many connections wait to be accepted, and how many may.
//
// For a socket in the LISTEN state, TCP_INFO's tcpi_unacked is the accept
// queue's length (what `ss -lnt` shows as Recv-Q) and tcpi_sacked its limit
// (the backlog, capped by net.core.somaxconn: Send-Q). The socket is shared
// by every worker of the pool, so any worker reads the pool's queue. Two
// parts of the worker read it: the accept gate, which must not step back
// while connections wait (package exclusive), and the metrics, which count
// the time the queue was seen full.
package acceptq

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Read returns the accept queue's length and limit of the listening socket
// behind rc. It fails when the socket is closed or is not TCP.
func Read(rc syscall.RawConn) (length, limit uint32, err error) {
	var info *unix.TCPInfo
	if cerr := rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil {
		return 0, 0, fmt.Errorf("accept queue: %w", cerr)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("accept queue: TCP_INFO: %w", err)
	}
	return info.Unacked, info.Sacked, nil
}
