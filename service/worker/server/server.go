package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/exclusive"
	"github.com/clusterapp/clusterapp/service/worker/internal/fdlimit"
	"github.com/clusterapp/clusterapp/service/worker/probe"
	"github.com/clusterapp/clusterapp/service/worker/rawio"
	"github.com/sirupsen/logrus"
)

// Options configure a Server. Zero durations disable the matching timeout
// except where noted.
type Options struct {
	ReadHeaderTimeout time.Duration // required (slowloris guard)
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	ShutdownTimeout   time.Duration // required: the longest a drain waits for connections
	DrainIdleGrace    time.Duration // idle time after which a draining connection is closed
	// MaxRequests recycles the worker after this many requests plus a
	// random 0..MaxRequestsJitter; 0 disables.
	MaxRequests       int
	MaxRequestsJitter int
	// ConnObservers are told about every connection opened and closed.
	ConnObservers []ConnObserver
	// WrapListener, when set, wraps each listener before serving (the
	// balancer's accept gate).
	WrapListener func(net.Listener) net.Listener
	// KeepAliveRequests ends a keep-alive connection (Connection: close)
	// after this many requests, so long-lived clients are redistributed
	// over the workers, like nginx's keepalive_requests; 0 = unlimited.
	KeepAliveRequests int
	// KeepAliveTime ends a keep-alive connection at its first response
	// after it has been open this long, like nginx's keepalive_time: a
	// restarted worker gets its share back within it even on slow routes,
	// where KeepAliveRequests takes minutes; 0 = no limit.
	KeepAliveTime time.Duration
	// Rebalance, when set, is asked as each response's header is written
	// (probes' aside): true ends the connection after it (Connection:
	// close), so the client reconnects where the balancer sends it
	// (balance.Balancer.Crowded). It runs on every response: keep it to a
	// load or two while nothing is to be moved.
	Rebalance func() bool
	// Now is the clock KeepAliveTime, DrainIdleGrace, ShutdownTimeout and
	// the open-file limit's warning interval are read on; default time.Now.
	// Timers (net/http's timeouts, the drain's polling) stay real.
	Now func() time.Time
	Log *logrus.Entry
}

// ConnObserver is told when client connections open and close.
type ConnObserver interface {
	ConnOpened()
	ConnClosed()
}

// ReuseObserver, when a ConnObserver implements it too, learns whether
// clients reuse connections: ConnReused(true) when a connection begins its
// second request, ConnReused(false) when one closes having carried at most
// one. Calls are serialised.
type ReuseObserver interface {
	ConnReused(reused bool)
}

// RejectObserver, when a ConnObserver implements it too, is told of every
// request net/http ended before the handler saw it: malformed (400),
// headers over MaxHeaderBytes (431), an unsupported version or transfer
// encoding (501, 505), headers not complete within ReadHeaderTimeout, the
// client leaving mid-headers, or no byte at all within ReadHeaderTimeout
// of connecting. net/http answers or closes those itself; without this they
// showed nowhere but in the connections accepted.
type RejectObserver interface {
	RequestRejected()
}

// Server is an http.Server with connection tracking, a lossless drain and
// request-count recycling.
type Server struct {
	opts     Options
	srv      *http.Server
	handler  http.Handler
	limit    uint64 // recycle after this many requests; 0 = never
	recycle  chan struct{}
	recycled sync.Once
	fds      *fdlimit.Guard // holds accepts back at the open-file limit
	// since is the time since a moment read on opts.Now: time.Since on
	// the real clock, which reads only the monotonic clock where Now
	// reads the wall clock too (the keep-alive time bound, every request).
	since func(time.Time) time.Duration

	ready    atomic.Bool
	draining atomic.Bool
	served   atomic.Uint64
	inFlight atomic.Int64

	// conns holds a *connInfo per open connection. The table is read and
	// updated on every request (StateActive, StateIdle) by connections on
	// every P: a sync.Map finds an entry without a lock, and the entry's
	// fields are atomic, so requests never queue behind each other here.
	conns sync.Map
	open  atomic.Int64 // entries in conns

	mu         sync.Mutex
	drainStart time.Time
	listeners  []net.Listener
	serving    sync.WaitGroup
}

type connInfo struct {
	state    atomic.Int32 // an http.ConnState
	requests atomic.Int64 // times the connection became active
	// handledThen is how many requests the handler had seen when the
	// connection last became active: the same number at its close means
	// net/http ended the request it was reading (RejectObserver).
	handledThen atomic.Int64
	// since is when it became idle (or opened), in Unix nanoseconds on
	// Options.Now, recorded only once a drain has begun: closeIdle counts
	// a connection quiet since before the drain as quiet since the drain's
	// start, so the clock is not read on every request.
	since atomic.Int64
}

// New wraps handler. The server does not serve until Serve.
func New(opts Options, handler http.Handler) *Server {
	s := &Server{opts: opts, recycle: make(chan struct{})}
	if opts.Now == nil {
		s.opts.Now, s.since = time.Now, time.Since
	} else {
		s.since = func(t time.Time) time.Duration { return opts.Now().Sub(t) }
	}
	if opts.MaxRequests > 0 {
		s.limit = uint64(opts.MaxRequests) + jitter(opts.MaxRequestsJitter)
	}
	s.handler = s.track(handler)
	s.fds = fdlimit.New(fdlimit.Options{Now: s.opts.Now, Log: opts.Log, Connections: func() int { return s.Stats().Connections }})
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		ReadTimeout:       opts.ReadTimeout,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		ConnState:         s.connState,
		// "OPTIONS *" goes to the handler like every request: net/http
		// otherwise answers it itself, without the stack's X-Worker and
		// uncounted (the worker's router answers it as net/http did).
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     newErrorLog(opts.Log),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			st := &connStats{opened: s.opts.Now()}
			if lc, ok := c.(*lingerConn); ok { // not for a connection that is not TCP
				st.conn, lc.stats = lc, st
			}
			return context.WithValue(ctx, connStatsKey{}, st)
		},
	}
	return s
}

// jitter is a random 0..max, for any max: rand.IntN(max+1) overflows (and
// panics) at the largest int, which CLUSTERAPP_MAX_REQUESTS_JITTER once let
// through.
func jitter(max int) uint64 {
	if max <= 0 {
		return 0
	}
	return rand.Uint64N(uint64(max) + 1)
}

// Handler is the full stack the server serves, for in-process health probes.
func (s *Server) Handler() http.Handler { return s.handler }

// RecycleLimit is the request count after which the worker recycles; 0 = never.
func (s *Server) RecycleLimit() uint64 { return s.limit }

// Recycle is closed once the worker has served RecycleLimit requests.
func (s *Server) Recycle() <-chan struct{} { return s.recycle }

// Ready reports whether the server accepts work: set by SetReady, false
// again once draining.
func (s *Server) Ready() bool { return s.ready.Load() && !s.draining.Load() }

// SetReady marks the server ready (after the first successful self-probe).
func (s *Server) SetReady() { s.ready.Store(true) }

// Stats is a snapshot for status lines.
type Stats struct {
	Served      uint64
	InFlight    int64
	Connections int
	Draining    bool
}

// Stats returns current counters.
func (s *Server) Stats() Stats {
	n := int(s.open.Load())
	return Stats{Served: s.served.Load(), InFlight: s.inFlight.Load(), Connections: n, Draining: s.draining.Load()}
}

// Serve starts serving on every listener and returns at once. Errors of a
// listener that fails while not draining are sent to errc.
//
// Each listener's poller entry is made exclusive, so a new connection wakes
// one idle worker of the pool instead of all (package exclusive); the
// connections it accepts read and write raw while the worker runs one P
// (package rawio); and it is wrapped so that, at the open-file limit,
// accepts wait in the shared backlog instead of failing (package fdlimit);
// a connection that closes wakes them. Its connections end gracefully when
// the worker ends them (lingerConn). The balancer's WrapListener goes
// around that.
func (s *Server) Serve(listeners []net.Listener, errc chan<- error) {
	guarded := make([]net.Listener, len(listeners))
	for i, l := range listeners {
		if x, err := exclusive.Register(l); err != nil {
			s.opts.Log.WithError(err).WithField("listen", l.Addr().String()).Warn("a new connection wakes every worker of the pool (the shared socket's herd)")
		} else {
			l = x
		}
		guarded[i] = lingerListener{s.fds.Wrap(rawio.Wrap(l))}
	}
	s.mu.Lock()
	s.listeners = guarded // Drain closes these, which also ends a wait at the limit
	s.mu.Unlock()
	for _, l := range guarded {
		if s.opts.WrapListener != nil {
			l = s.opts.WrapListener(l)
		}
		s.serving.Add(1)
		go func() {
			defer s.serving.Done()
			err := s.srv.Serve(l)
			if s.draining.Load() || errors.Is(err, http.ErrServerClosed) {
				return
			}
			errc <- fmt.Errorf("serve %s: %w", l.Addr(), err)
		}()
	}
}

// track counts requests, marks responses Connection: close while draining,
// and triggers recycling.
func (s *Server) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if probe.Is(r) {
			next.ServeHTTP(w, r)
			return
		}
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		n := s.served.Add(1)
		if s.limit > 0 && n >= s.limit {
			s.recycled.Do(func() {
				s.opts.Log.WithField("requests", n).Info("request limit reached; recycling this worker")
				close(s.recycle)
			})
		}
		cw := &closingWriter{ResponseWriter: w, draining: &s.draining, rebalance: s.opts.Rebalance}
		st, _ := r.Context().Value(connStatsKey{}).(*connStats)
		if st != nil {
			n := st.requests.Add(1)
			cw.request = n
			k, t := s.opts.KeepAliveRequests, s.opts.KeepAliveTime
			cw.last = (k > 0 && n >= int64(k)) || (t > 0 && s.since(st.opened) >= t)
		}
		next.ServeHTTP(cw, r)
		if cw.status == 0 && !cw.hijacked {
			// Nothing written: net/http answers 200 after this returns,
			// past the writer. Written here, it gets Connection: close
			// when it must, like every other answer.
			cw.WriteHeader(http.StatusOK)
		}
		// Only once the handler has returned: net/http then closes the
		// connection from its own goroutine. A drain's forced close of a
		// connection whose handler still runs must not wait on the client.
		if cw.closing && st != nil && st.conn != nil {
			st.conn.lingerOnClose()
		}
	})
}

// connStatsKey holds a connection's *connStats in its context.
type connStatsKey struct{}

// connStats is what the keep-alive bounds need to know about a connection.
type connStats struct {
	requests atomic.Int64
	opened   time.Time
	conn     *lingerConn // nil when not TCP
}

func (s *Server) connState(c net.Conn, state http.ConnState) {
	conns := &s.conns
	switch state {
	case http.StateNew:
		info := &connInfo{}
		info.state.Store(int32(state))
		s.markQuiet(info)
		conns.Store(c, info)
		if lc, ok := c.(*lingerConn); ok {
			lc.info = info
		}
		s.open.Add(1)
		for _, o := range s.opts.ConnObservers {
			o.ConnOpened()
		}
	case http.StateActive, http.StateIdle:
		info := s.info(c)
		if info == nil {
			return
		}
		if state == http.StateIdle {
			s.markQuiet(info) // only idle connections are timed (closeIdle)
		} else {
			if info.requests.Add(1) == 2 {
				s.reused(true)
			}
			info.handledThen.Store(handled(c))
		}
		info.state.Store(int32(state))
	case http.StateClosed, http.StateHijacked:
		if state == http.StateClosed {
			s.fds.Released() // net/http has closed the descriptor by now
		}
		if v, ok := conns.LoadAndDelete(c); ok {
			s.open.Add(-1)
			info := v.(*connInfo)
			if info.requests.Load() <= 1 {
				s.reused(false)
			}
			if state == http.StateClosed && s.rejected(c, info) {
				s.observeRejected()
			}
			for _, o := range s.opts.ConnObservers {
				o.ConnClosed()
			}
		}
	}
}

// info is c's entry in the connection table: kept on the connection itself
// when it is TCP, so that the two state changes of every request find it
// without hashing the connection into the table (about 60 ns a request).
func (s *Server) info(c net.Conn) *connInfo {
	if lc, ok := c.(*lingerConn); ok && lc.info != nil {
		return lc.info
	}
	if v, ok := s.conns.Load(c); ok {
		return v.(*connInfo)
	}
	return nil
}

// markQuiet records when a connection fell quiet, once a drain has begun
// (connInfo.since).
func (s *Server) markQuiet(info *connInfo) {
	if s.draining.Load() {
		info.since.Store(s.opts.Now().UnixNano())
	} else {
		info.since.Store(0)
	}
}

// rejected reports whether c closed on a request net/http ended before the
// handler saw it (RejectObserver): bytes arrived and no request reached the
// handler since, or none arrived within ReadHeaderTimeout of connecting
// (a drain's closing of idle connections aside).
func (s *Server) rejected(c net.Conn, info *connInfo) bool {
	n := handled(c)
	if n < 0 {
		return false
	}
	if info.requests.Load() > 0 {
		return n == info.handledThen.Load()
	}
	lc := c.(*lingerConn)
	t := s.opts.ReadHeaderTimeout
	return t > 0 && !s.draining.Load() && s.opts.Now().Sub(lc.stats.opened) >= t
}

// handled is how many requests of c reached the handler; -1 when the server
// does not know (a connection that is not TCP).
func handled(c net.Conn) int64 {
	if lc, ok := c.(*lingerConn); ok && lc.stats != nil {
		return lc.stats.requests.Load()
	}
	return -1
}

func (s *Server) observeRejected() {
	for _, o := range s.opts.ConnObservers {
		if r, ok := o.(RejectObserver); ok {
			r.RequestRejected()
		}
	}
}

func (s *Server) reused(reused bool) {
	for _, o := range s.opts.ConnObservers {
		if r, ok := o.(ReuseObserver); ok {
			r.ConnReused(reused)
		}
	}
}
