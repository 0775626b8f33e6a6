package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/metrics"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// An absolute-form request target with an empty path ("GET http://host
// HTTP/1.1", as a proxy may forward it) names "/" (RFC 9110, section
// 4.2.3: an empty path is equivalent to "/"). It was answered 404 "no
// route for http://host".
func TestAbsoluteFormWithoutPathIsTheRoot(t *testing.T) {
	routes := append(testRoutes(Tools{}), Route{Path: "/", Handler: testRoutes(Tools{})[0].Handler})
	l, _ := test.NewNullLogger()
	m := metrics.New(metrics.Options{Worker: "7", Routes: Labels(func(Tools) []Route { return routes }), Start: time.Now(), Log: logrus.NewEntry(l)})
	s := NewStack(StackOptions{Name: "7", Routes: routes, Metrics: m, Log: logrus.NewEntry(l)})
	for _, target := range []string{"http://example.com", "https://example.com:8443", "http://example.com/"} {
		rec := do(s, "GET", target)
		if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != "hello" {
			t.Errorf("GET %s = %d %q, want the root's 200", target, rec.Code, rec.Body)
		}
	}
	if rec := do(s, "GET", "http://example.com/nope"); rec.Code != 404 {
		t.Errorf("GET http://example.com/nope = %d, want 404", rec.Code)
	}
}
