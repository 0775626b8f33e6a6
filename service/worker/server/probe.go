package server

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/clusterapp/clusterapp/service/worker/probe"
)

// Probe sends GET /healthz through the same handler stack clients reach and
// fails unless it answers 200. It is in-process on purpose: the listening
// socket is shared, so a probe through it would land on whichever worker
// accepts it, not necessarily this one. The request is marked unobserved so
// it does not count as client traffic.
func (s *Server) Probe(ctx context.Context) error {
	req, err := http.NewRequestWithContext(probe.Mark(ctx), http.MethodGet, probe.Path, nil)
	if err != nil {
		return fmt.Errorf("build probe request: %w", err)
	}
	rec := &recorder{header: http.Header{}}
	s.handler.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK // a handler that writes nothing answers 200
	}
	if rec.status != http.StatusOK {
		return fmt.Errorf("GET %s answered %d", probe.Path, rec.status)
	}
	return nil
}

// recorder is a minimal http.ResponseWriter that keeps the status.
type recorder struct {
	header http.Header
	status int
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return io.Discard.Write(b)
}
