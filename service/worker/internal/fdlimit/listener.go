package fdlimit

import (
	"net"
	"sync"
	"syscall"

	"github.com/clusterapp/clusterapp/service/worker/exclusive"
	"github.com/sirupsen/logrus"
)

// Wrap returns l with its accepts held back at the open-file limit. Closing
// the wrapper closes l and ends a waiting Accept at once.
func (g *Guard) Wrap(l net.Listener) net.Listener {
	return &listener{Listener: l, g: g, closed: make(chan struct{})}
}

type listener struct {
	net.Listener
	g      *Guard
	closed chan struct{}
	once   sync.Once
}

// Accept returns the next connection, or any error but EMFILE and ENFILE.
// At the limit it waits (see the package comment) and tries again, until a
// descriptor is free or the listener is closed.
func (l *listener) Accept() (net.Conn, error) {
	var freed <-chan struct{} // armed before the latest attempt, once at the limit
	for {
		c, err := l.Listener.Accept()
		if !IsLimit(err) {
			return c, err
		}
		l.g.limitReached(err)
		if freed == nil {
			freed = l.g.arm() // and try once more before waiting: a release may have come first
			continue
		}
		_ = exclusive.Pause(l.Listener) // a failed pause costs a wake-up
		select {
		case <-freed:
		case <-l.g.opts.Clock.After(l.g.opts.Retry):
		case <-l.closed: // the next attempt returns the close error
		}
		_ = exclusive.Resume(l.Listener) // or Accept fails, if it cannot
		freed = l.g.arm()
	}
}

// Unwrap returns the wrapped listener (package exclusive finds its wait
// through it).
func (l *listener) Unwrap() net.Listener { return l.Listener }

// Close closes the listener and wakes an Accept waiting at the limit.
func (l *listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitReached counts an attempt that found no descriptor and warns at most
// once per LogEvery.
func (g *Guard) limitReached(err error) {
	g.mu.Lock()
	g.putOff++
	now := g.opts.Now()
	if !g.warned.IsZero() && now.Sub(g.warned) < g.opts.LogEvery {
		g.mu.Unlock()
		return
	}
	fields := logrus.Fields{"accepts_put_off": g.putOff, "warn_every": g.opts.LogEvery}
	g.putOff, g.warned = 0, now
	g.mu.Unlock()
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil { // needs no descriptor
		fields["open_files_limit"] = rl.Cur
	}
	if g.opts.Connections != nil {
		fields["connections"] = g.opts.Connections()
	}
	g.opts.Log.WithError(err).WithFields(fields).
		Warn("open-file limit reached; new connections wait in the listen backlog, where other workers may take them")
}
