package worker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/metrics"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// A route can stream and take its connection over through the writer the
// stack hands it, with the access log on (its writer wraps the response)
// as with it off: the wrapper hid http.Flusher and http.Hijacker.
func TestRoutesCanFlushAndHijack(t *testing.T) {
	for _, accessLog := range []bool{false, true} {
		routes := []Route{{Path: "/caps", Handler: func(w http.ResponseWriter, _ *http.Request) {
			_, flusher := w.(http.Flusher)
			_, hijacker := w.(http.Hijacker)
			if !flusher || !hijacker {
				w.WriteHeader(http.StatusNotImplemented)
			}
		}}}
		l, _ := test.NewNullLogger()
		m := metrics.New(metrics.Options{Worker: "7", Routes: Labels(func(Tools) []Route { return routes }), Start: time.Now(), Log: logrus.NewEntry(l)})
		s := NewStack(StackOptions{Name: "7", Routes: routes, Metrics: m, Log: logrus.NewEntry(l), AccessLog: accessLog})
		srv := httptest.NewServer(s)
		resp, err := http.Get(srv.URL + "/caps")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("access log %v: the route's writer is no http.Flusher or no http.Hijacker (%d)", accessLog, resp.StatusCode)
		}
	}
}
