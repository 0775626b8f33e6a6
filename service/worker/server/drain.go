package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// pollInterval is how often a drain looks at its connections.
const pollInterval = 10 * time.Millisecond

// Drain stops accepting, lets every connection finish (see the package
// comment) and shuts the server down. It returns when the server is stopped,
// or early with ctx's error if ctx ends (a second signal): the caller then
// exits at once.
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.draining.Store(true)
	s.drainStart = s.opts.Now()
	for _, l := range s.listeners {
		_ = l.Close() // our own copy; a close error leaves nothing to do
	}
	s.mu.Unlock()
	s.serving.Wait()

	deadline := s.opts.Now().Add(s.opts.ShutdownTimeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for s.closeIdle() > 0 && s.opts.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			_ = s.srv.Close() // forced: the caller is exiting anyway
			return ctx.Err()
		case <-tick.C:
		}
	}
	if left := s.Stats().Connections; left > 0 {
		s.opts.Log.WithField("connections", left).WithField("timeout", s.opts.ShutdownTimeout).
			Warn("shutdown timeout reached; closing the connections left")
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if err := s.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// closeIdle closes connections that have been idle (or never sent a request)
// for DrainIdleGrace since the drain began, and returns how many remain open.
func (s *Server) closeIdle() int {
	s.mu.Lock()
	start := s.drainStart
	s.mu.Unlock()
	now := s.opts.Now()
	s.conns.Range(func(k, v any) bool {
		info := v.(*connInfo)
		if st := http.ConnState(info.state.Load()); st != http.StateIdle && st != http.StateNew {
			return true
		}
		quiet := now.Sub(start) // quiet since before the drain (since 0) counts from its start
		if since := info.since.Load(); since != 0 && now.Sub(time.Unix(0, since)) < quiet {
			quiet = now.Sub(time.Unix(0, since))
		}
		if quiet >= s.opts.DrainIdleGrace {
			_ = k.(net.Conn).Close() // net/http notices, reports StateClosed and forgets it
		}
		return true
	})
	return int(s.open.Load())
}
