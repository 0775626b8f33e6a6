package server

import (
	"bytes"
	"context"
	"fmt"
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
		// The body says why (/healthz's error), for the watchdog's log line.
		return fmt.Errorf("GET %s answered %d: %s", probe.Path, rec.status, bytes.TrimSpace(rec.body))
	}
	return nil
}

// maxProbeBody is how much of a failed probe's answer its error quotes.
const maxProbeBody = 1024

// recorder is a minimal http.ResponseWriter that keeps the status and the
// start of the body.
type recorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	r.body = append(r.body, b[:min(len(b), maxProbeBody-len(r.body))]...)
	return len(b), nil
}
