package systemd_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// `clusterapp status --watch` in a real terminal (tmux): one line per
// worker redrawn in place, with requests per second while load runs, and
// Ctrl-C ends it.
func TestStatusWatchInATerminal(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	b.Start(2)
	b.Must("tmux", "new-session", "-d", "-s", "watch", "-x", "160", "-y", "30", "clusterapp status --watch; sleep 30")
	defer b.Run("tmux", "kill-server")
	wait := b.LoadAsync("/", "-c", "4", "-rate", "500", "-d", "6s")
	row := regexp.MustCompile(`(?m)^([12])\s+active/running\s+\d+\s+(\d+)\s+\d+\s+(≤\S+)\s+\S+\s+0\s+ok\s*$`)
	var screen string
	b.Eventually(5*time.Second, "both workers with a request rate and a p99 on the screen", func() bool {
		time.Sleep(300 * time.Millisecond)
		screen = b.Must("tmux", "capture-pane", "-p", "-t", "watch")
		busy := 0
		for _, m := range row.FindAllStringSubmatch(screen, -1) {
			if m[2] != "0" {
				busy++
			}
		}
		return busy == 2
	})
	wait()
	t.Logf("the screen:\n%s", screen)
	if n := strings.Count(screen, "WORKER  STATE"); n != 1 {
		t.Errorf("the header appears %d times: the view must redraw in place, not scroll\n%s", n, screen)
	}
	b.Must("tmux", "send-keys", "-t", "watch", "C-c")
	b.Eventually(5*time.Second, "Ctrl-C ends the view", func() bool {
		out, _ := b.Run("sh", "-c", "pgrep -x clusterapp -a | grep -c -- --watch")
		return strings.TrimSpace(out) == "0"
	})
}
