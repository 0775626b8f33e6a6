package app

import "net/http"

// healthz is liveness: the worker's handler stack answers. The watchdog
// probes this route in-process, so a worker that cannot answer it stops
// pinging systemd.
func (a *App) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "worker": a.opts.Instance})
}

// readyz is readiness: 503 while the worker starts or drains, so a load
// balancer in front stops sending it new work.
func (a *App) readyz(w http.ResponseWriter, _ *http.Request) {
	if a.opts.Ready != nil && !a.opts.Ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "worker": a.opts.Instance})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "worker": a.opts.Instance})
}
