package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/worker/logging"
)

// A recycled worker's lifecycle lines each carry their MESSAGE_ID= field and
// the worker's name; outside journald they are text fields of the stderr
// line (systemd/journal_test.go checks the journal fields under systemd).
func TestLifecycleLinesCarryMessageIDs(t *testing.T) {
	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, "--instance=3", "CLUSTERAPP_MAX_REQUESTS=2")
	n.waitFor(t, "READY=1", 10*time.Second)
	for range 2 {
		if resp, _ := get(t, "http://"+sock.addr+"/"); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if code := w.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("recycled worker exit %d, want 0", code)
	}
	lines := strings.Split(w.stderr.String(), "\n")
	for msg, id := range map[string]string{
		"serving":                            logging.MsgReady,
		`"request limit reached; recycling"`: logging.MsgRecycled,
		"draining":                           logging.MsgDraining,
		`"drained; exiting"`:                 logging.MsgDrained,
	} {
		re := regexp.MustCompile(`\bmsg=` + regexp.QuoteMeta(msg) + ` .*\bmessage_id=` + id + `\b.*\bworker=3\b`)
		found := 0
		for _, l := range lines {
			if re.MatchString(l) {
				found++
			}
		}
		if found != 1 {
			t.Errorf("%d lines match %s, want 1; stderr:\n%s", found, re, w.stderr)
		}
	}
}
