package worker

import (
	"bytes"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/sirupsen/logrus"
)

// The warning names the setting and where to put it, and only a worker
// systemd started gets it.
func TestCheckMonitorWarnsAPoolWorkerOnly(t *testing.T) {
	var out bytes.Buffer
	log := logrus.New()
	log.SetOutput(&out)
	entry := logrus.NewEntry(log)

	checkMonitor("http2server=0", false, entry)
	checkMonitor(config.MonitorTrace, true, entry)
	if out.Len() != 0 {
		t.Fatalf("warned a standalone worker or one with the setting: %s", out.String())
	}
	checkMonitor("http2server=0", true, entry)
	for _, want := range []string{"level=warning", `GODEBUG="http2server=0"`, "add " + config.MonitorTrace, "environment file"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("warning %q lacks %q", out.String(), want)
		}
	}
}
