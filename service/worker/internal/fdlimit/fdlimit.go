// Package fdlimit keeps a worker serving, and its journal readable, while
// it is at its open-file limit.
//
// Every accepted connection is a descriptor, so a client that holds
// LimitNOFILE= connections open makes accept(2) fail with EMFILE (ENFILE when
// the system-wide table is full). net/http treats that as a temporary error:
// it logs "http: Accept error" and retries after 5 ms to 1 s, for as long as
// the limit lasts, one journal line per retry. Linux allocates the
// descriptor before it takes a connection off the queue, so a failed accept
// leaves the connection where it was: in the listening socket's backlog,
// which every worker shares, so a worker with descriptors to spare may take
// it.
//
// A Guard wraps each listener of a server. When the inner Accept fails with
// EMFILE or ENFILE, the wrapper does not hand the error to net/http; it waits
// until a descriptor may be free and tries again. The server calls Released
// whenever one of its connections has closed, which wakes the wait at once,
// so accepting resumes as soon as descriptors free up; a short Retry timer
// covers descriptors freed elsewhere in the process. The limit is logged once
// per LogEvery, with how many accept attempts found no descriptor, never once
// per attempt. Connections already open are not touched and keep being
// served; the watchdog ping needs no descriptor (see package notify).
package fdlimit

import (
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
)

// Options configure a Guard.
type Options struct {
	// LogEvery is the least time between two warnings about the limit;
	// default 10s.
	LogEvery time.Duration
	// Retry is the longest an Accept at the limit waits before it tries
	// again without having been woken by Released; default 100ms.
	Retry time.Duration
	// Connections, when set, reports the connections the server holds, for
	// the warning.
	Connections func() int
	// Now is the clock the warning interval is read on; default time.Now.
	Now func() time.Time
	// Clock drives the retry timer; default the real one.
	Clock Clock
	// Log receives the warning; required.
	Log *logrus.Entry
}

// Clock is the retry timer's source, injected so tests fire it.
type Clock interface {
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Guard holds back the accepts of the listeners it wraps while the process
// has no descriptor to spare. It is safe for concurrent use.
type Guard struct {
	opts Options

	armed atomic.Bool // an Accept at the limit wants to hear about Released

	mu     sync.Mutex
	freed  chan struct{} // closed by Released when armed, then replaced
	putOff int           // accept attempts that found no descriptor since the last warning
	warned time.Time     // the last warning; zero before the first
}

// New returns a Guard; wrap each listener with Wrap.
func New(opts Options) *Guard {
	if opts.LogEvery <= 0 {
		opts.LogEvery = 10 * time.Second
	}
	if opts.Retry <= 0 {
		opts.Retry = 100 * time.Millisecond
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Guard{opts: opts, freed: make(chan struct{})}
}

// Released tells the guard a descriptor may have been freed (a connection
// closed). It wakes every Accept waiting at the limit; it costs one atomic
// load when none waits, so it can be called for every closed connection.
func (g *Guard) Released() {
	if !g.armed.Load() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.armed.Swap(false) {
		close(g.freed)
		g.freed = make(chan struct{})
	}
}

// arm returns a channel closed by the next Released. Arming before an
// accept attempt means a descriptor freed between a failed attempt and the
// wait is not missed.
func (g *Guard) arm() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed.Store(true)
	return g.freed
}

// IsLimit reports whether err means the process or the system has no
// descriptor to spare.
func IsLimit(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
