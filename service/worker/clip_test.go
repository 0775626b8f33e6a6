package worker

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

func TestClip(t *testing.T) {
	long := strings.Repeat("a", MaxClip-1) + "é" + strings.Repeat("b", 100) // é straddles the cut
	stray := strings.Repeat("\x80", MaxClip+10)                             // no character starts anywhere
	for _, tc := range []struct{ name, in, want string }{
		{"short", "/nope", "/nope"},
		{"exactly the limit", strings.Repeat("a", MaxClip), strings.Repeat("a", MaxClip)},
		{"one byte over", strings.Repeat("a", MaxClip+1), strings.Repeat("a", MaxClip) + "…"},
		{"a character across the cut", long, strings.Repeat("a", MaxClip-1) + "…"},
		{"invalid UTF-8", stray, stray[:MaxClip-(utf8.UTFMax-1)] + "…"}, // backs off one character at most
	} {
		got := Clip(tc.in)
		if got != tc.want {
			t.Errorf("%s: Clip = %q, want %q", tc.name, got, tc.want)
		}
		if utf8.ValidString(tc.in) && !utf8.ValidString(got) {
			t.Errorf("%s: Clip of valid UTF-8 = %q, not valid UTF-8", tc.name, got)
		}
	}
}

// A 404 (and a 405, and CONNECT's 404, and the metrics listener's) quotes
// what the client asked for clipped: a request line may be as long as the
// header limit, and the worker must not reflect kilobytes of it.
func TestAnswersQuoteTheRequestClipped(t *testing.T) {
	s, _ := newStack(t, nil)
	path := "/" + strings.Repeat("p", 8000)
	for _, tc := range []struct {
		name   string
		h      http.Handler
		method string
		target string
		want   string
	}{
		{"404", s, "GET", path, "no route for " + path[:MaxClip] + "…"},
		{"CONNECT's 404", s, "CONNECT", strings.Repeat("h", 8000) + ":443", "no route for " + strings.Repeat("h", MaxClip) + "…"},
		{"405", s, strings.Repeat("M", 8000), "/hello", "method " + strings.Repeat("M", MaxClip) + "… not allowed on /hello"},
		{"metrics listener's 404", scrapeHandler(http.NotFoundHandler()), "GET", path, "no route for " + path[:MaxClip] + "… on the metrics listener"},
	} {
		rec := do(tc.h, tc.method, tc.target)
		msg, _ := decode(t, rec)["error"].(string)
		if !strings.HasPrefix(msg, tc.want) || rec.Body.Len() > 2*MaxClip+200 {
			t.Errorf("%s: %d, a body of %d bytes, error %.400q, want it to start %.400q", tc.name, rec.Code, rec.Body.Len(), msg, tc.want)
		}
	}
}

// The access log quotes the path and method clipped too: a client must not
// write kilobytes into the journal per request.
func TestAccessLogClipsThePath(t *testing.T) {
	l, hook := test.NewNullLogger()
	s, _ := newStack(t, func(o *StackOptions) { o.AccessLog = true; o.Log = logrus.NewEntry(l) })
	path := "/" + strings.Repeat("p", 8000)
	do(s, "GET", path)
	e := hook.LastEntry()
	if e == nil || e.Data["path"] != path[:MaxClip]+"…" || e.Data["status"] != 404 {
		t.Fatalf("access log entry of a path of %d bytes: %.400v, want the path clipped to %d bytes", len(path), e, MaxClip)
	}
}
