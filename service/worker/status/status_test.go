package status

import "testing"

func TestRoundTrip(t *testing.T) {
	for _, l := range []Load{{}, {Served: 1234, InFlight: 3, Queued: 5, Connections: 17}, {Served: 1 << 62}} {
		got, ok := Parse(Serving(l))
		if !ok || got != l {
			t.Errorf("Parse(Serving(%+v)) = %+v, %v", l, got, ok)
		}
		if _, ok := Parse(Draining(l)); ok {
			t.Errorf("a draining line %q parses as serving", Draining(l))
		}
	}
}

func TestParseRefusesOtherLines(t *testing.T) {
	for _, text := range []string{
		"",
		"draining: signal terminated",
		"started 3 times in a row without running 30s or stopping cleanly; waiting 2s before serving",
		"serving: many requests served, 1 in flight, 0 queued, 1 connections open",
		"serving: 1 requests served, 0 in flight, 0 connections open", // the line before queued was counted apart
		"serving: 99999999999999999999 requests served, 0 in flight, 0 queued, 0 connections open",
	} {
		if l, ok := Parse(text); ok {
			t.Errorf("Parse(%q) = %+v, want not ok", text, l)
		}
	}
}
