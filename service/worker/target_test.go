package worker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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

// The HTTP/2 connection preface ("PRI * HTTP/2.0", a client speaking h2c
// with prior knowledge) is answered 505 naming the protocol the port
// speaks; it was 404 "no route for *", counted as a missing page.
func TestHTTP2PrefaceIsVersionNotSupported(t *testing.T) {
	s, m := newStack(t, nil)
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("body: %v", err)
	}
	if msg := fmt.Sprint(body["error"]); resp.StatusCode != http.StatusHTTPVersionNotSupported || !strings.Contains(msg, "HTTP/1.1") {
		t.Fatalf("preface: %d %q, want 505 naming HTTP/1.1", resp.StatusCode, msg)
	}
	if n := requests(t, m, unmatched, "505"); n != 1 {
		t.Fatalf("505 counted %v times under unmatched, want 1", n)
	}
}
