// Package probe is the one home of the worker's health probe vocabulary: the
// path it requests and the context mark that keeps it out of the numbers.
//
// The probe goes through the same handler stack a client reaches (package
// server sends it in-process), so READY=1 and every watchdog ping prove the
// stack answers. It is not client traffic: the metrics, the access log and
// the server's request count skip a request whose context carries the mark.
package probe

import (
	"context"
	"net/http"
)

// Path is the route the health probe requests, and the worker's liveness
// route (/healthz).
const Path = "/healthz"

type markKey struct{}

// Mark marks ctx as the probe's: requests carrying it are not counted.
func Mark(ctx context.Context) context.Context {
	return context.WithValue(ctx, markKey{}, true)
}

// Marked reports whether ctx was marked by Mark.
func Marked(ctx context.Context) bool {
	v, _ := ctx.Value(markKey{}).(bool)
	return v
}

// Is reports whether r is the probe's: it came from no connection (a
// request net/http reads off a TCP connection has the client's address in
// RemoteAddr) and carries the mark. The address is looked at first, so a
// client's request is told apart without walking its context's chain of
// values (five deep under net/http, three times a request).
func Is(r *http.Request) bool { return r.RemoteAddr == "" && Marked(r.Context()) }
