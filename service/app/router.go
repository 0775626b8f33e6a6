package app

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// Routes are the route labels the router counts requests under (every
// route, debug ones included, so that every worker lays out the shared
// metrics table alike whatever its settings), and "unmatched" for the rest.
var Routes = []string{"/", "/fib", "/slow", "/healthz", "/readyz", "/debug/crash", "/debug/hang", "/debug/leak", "unmatched"}

// router dispatches on the exact path. GET routes also answer HEAD.
func (a *App) router() http.Handler {
	routes := map[string]http.Handler{}
	add := func(path string, h http.HandlerFunc, methods ...string) {
		if slices.Contains(methods, http.MethodGet) {
			methods = append(methods, http.MethodHead)
		}
		routes[path] = a.opts.Metrics.Instrument(path, allowOnly(methods, h))
	}
	add("/", a.index, http.MethodGet)
	add("/fib", a.deadline(a.fib), http.MethodGet)
	add("/slow", a.slow, http.MethodGet)
	add("/healthz", a.healthz, http.MethodGet)
	add("/readyz", a.readyz, http.MethodGet)
	if a.opts.DebugEndpoints {
		add("/debug/crash", a.crash, http.MethodGet, http.MethodPost)
		add("/debug/hang", a.hang, http.MethodGet, http.MethodPost)
		add("/debug/leak", a.leak, http.MethodGet, http.MethodPost)
	}
	notFound := a.opts.Metrics.Instrument("unmatched", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no route for "+r.URL.Path, nil)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := routes[r.URL.Path]; ok {
			h.ServeHTTP(w, r)
			return
		}
		notFound.ServeHTTP(w, r)
	})
}

// allowOnly answers a JSON 405 with an Allow header to other methods.
func allowOnly(methods []string, next http.HandlerFunc) http.Handler {
	allow := strings.Join(methods, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(methods, r.Method) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path, map[string]any{"allow": methods})
			return
		}
		next(w, r)
	})
}

// writeJSON writes v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do about it
}

// writeError writes {"error": msg, "status": code, ...extra}.
func writeError(w http.ResponseWriter, status int, msg string, extra map[string]any) {
	body := map[string]any{"error": msg, "status": status}
	for k, v := range extra {
		body[k] = v
	}
	writeJSON(w, status, body)
}
