package notify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// ErrClosed is returned for a message sent after Close.
var ErrClosed = errors.New("notify: notifier closed")

// sendTimeout bounds one message. A datagram to a full receive queue blocks
// until systemd reads; a worker must not hang its pinger on a busy manager.
const sendTimeout = time.Second

// socket is one unixgram connection to systemd's notify socket, dialled when
// the Notifier is made and reused for every message.
type socket struct {
	addr *net.UnixAddr
	dial func(*net.UnixAddr) (*net.UnixConn, error)

	mu     sync.Mutex
	conn   *net.UnixConn // nil before a dial succeeds and after a failed send
	closed bool
}

func dialUnixgram(addr *net.UnixAddr) (*net.UnixConn, error) {
	return net.DialUnix("unixgram", nil, addr)
}

// newSocket returns a socket for path (a file system path, or an abstract
// address starting with '@', which package net translates) and dials it at
// once. A failed dial is not an error yet: the first send dials again and
// reports it.
func newSocket(path string, dial func(*net.UnixAddr) (*net.UnixConn, error)) *socket {
	s := &socket{addr: &net.UnixAddr{Name: path, Net: "unixgram"}, dial: dial}
	s.mu.Lock()
	_ = s.connect() // reported by the first send, which dials again
	s.mu.Unlock()
	return s
}

// send writes msg as one datagram. A connection that fails (ECONNREFUSED
// once systemd's socket is gone or re-created, say) is dropped and dialled
// again once; a timeout is returned as it is, because the connection is fine
// and systemd is only slow to read.
func (s *socket) send(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.conn != nil {
		err := s.write(msg)
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		s.drop()
	}
	if err := s.connect(); err != nil {
		return err
	}
	if err := s.write(msg); err != nil {
		s.drop()
		return err
	}
	return nil
}

func (s *socket) write(msg []byte) error {
	if err := s.conn.SetWriteDeadline(time.Now().Add(sendTimeout)); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	if _, err := s.conn.Write(msg); err != nil {
		return fmt.Errorf("write %s: %w", s.addr.Name, err)
	}
	return nil
}

// connect dials the socket; the caller holds mu.
func (s *socket) connect() error {
	c, err := s.dial(s.addr)
	if err != nil {
		return fmt.Errorf("dial %s: %w", s.addr.Name, err)
	}
	s.conn = c
	return nil
}

// drop closes a broken connection; the caller holds mu.
func (s *socket) drop() {
	_ = s.conn.Close() // broken already; nothing more to learn from closing it
	s.conn = nil
}

// close releases the connection for good; later sends return ErrClosed.
func (s *socket) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}
