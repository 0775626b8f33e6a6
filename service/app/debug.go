package app

import (
	"fmt"
	"net/http"
	"strconv"
)

// maxLeakMiB bounds one /debug/leak request.
const maxLeakMiB = 1024

// crash ends the process with a non-zero status, as an unhandled error would.
func (a *App) crash(w http.ResponseWriter, _ *http.Request) {
	a.opts.Log.Error("crashing on request to /debug/crash")
	a.opts.Crash()
}

// hang takes the shared state lock and never releases it. Every request after
// it (health probe included) blocks behind it, like a real deadlock.
func (a *App) hang(w http.ResponseWriter, _ *http.Request) {
	a.opts.Log.Warn("wedging the worker on request to /debug/hang: every request will now block")
	a.state.Lock()
	select {} // hold the lock forever; the request is never answered
}

// leak retains mb MiB of touched memory until the process ends.
func (a *App) leak(w http.ResponseWriter, r *http.Request) {
	mb, err := strconv.Atoi(r.URL.Query().Get("mb"))
	if err != nil || mb < 1 || mb > maxLeakMiB {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("parameter mb must be an integer from 1 to %d", maxLeakMiB),
			map[string]any{"parameter": "mb", "min": 1, "max": maxLeakMiB})
		return
	}
	buf := make([]byte, mb<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1 // touch every page so it is resident, not just reserved
	}
	a.state.Lock()
	a.leaked = append(a.leaked, buf)
	total := 0
	for _, b := range a.leaked {
		total += len(b)
	}
	a.state.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"leaked_mib": mb, "retained_mib": total >> 20})
}
