package worker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/metrics"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// The metrics listener answers what it does not serve as the service port
// does: a JSON error saying what was wrong and what it serves. net/http's
// ServeMux answered "404 page not found" and "Method Not Allowed" in plain
// text, and redirected unclean paths.
func TestMetricsListenerErrors(t *testing.T) {
	l, _ := test.NewNullLogger()
	m := metrics.New(metrics.Options{Worker: "7", Routes: Labels(testRoutes), Start: time.Now(), Log: logrus.NewEntry(l)})
	h := metricsServer(m, logrus.NewEntry(l)).Handler
	for _, tc := range []struct {
		method, target string
		status         int
		errorHas       string
		allow          string
	}{
		{"GET", "/", 404, "no route for / on the metrics listener: it serves GET /metrics", ""},
		{"GET", "/metrics/", 404, "no route for /metrics/", ""},
		{"GET", "/./metrics", 404, "no route for /./metrics", ""},
		{"POST", "/metrics", 405, "method POST not allowed on /metrics", "GET, HEAD"},
		{"DELETE", "/metrics", 405, "method DELETE not allowed on /metrics", "GET, HEAD"},
	} {
		rec := do(h, tc.method, tc.target)
		if rec.Code != tc.status || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s = %d %q %q, want %d in JSON", tc.method, tc.target, rec.Code, rec.Header().Get("Content-Type"), rec.Body, tc.status)
			continue
		}
		body := decode(t, rec)
		if msg := fmt.Sprint(body["error"]); !strings.Contains(msg, tc.errorHas) {
			t.Errorf("%s %s: error %q, want it to say %q", tc.method, tc.target, msg, tc.errorHas)
		}
		if got := rec.Header().Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.target, got, tc.allow)
		}
	}
	for _, method := range []string{"GET", "HEAD"} {
		if rec := do(h, method, "/metrics"); rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
			t.Errorf("%s /metrics = %d %q", method, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
}
