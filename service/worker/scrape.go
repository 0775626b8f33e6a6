package worker

import (
	"net/http"
)

// metricsPath is the one route of the metrics listener
// (CLUSTERAPP_METRICS_LISTEN).
const metricsPath = "/metrics"

// scrapeHandler serves metrics at metricsPath (GET and HEAD) and answers
// anything else as the service port does: a JSON 404 naming the route there
// is, a JSON 405 with Allow. An operator who mistypes the path or the port
// learns what to ask for instead of reading "404 page not found".
func scrapeHandler(metrics http.Handler) http.Handler {
	get := allowOnly([]string{http.MethodGet, http.MethodHead}, metrics.ServeHTTP)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != metricsPath {
			Error(w, http.StatusNotFound, "no route for "+Clip(asked(r))+" on the metrics listener: it serves GET "+metricsPath,
				map[string]any{"routes": []string{metricsPath}})
			return
		}
		get.ServeHTTP(w, r)
	})
}
