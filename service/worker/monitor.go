package worker

import (
	"github.com/clusterapp/clusterapp/service/config"
	"github.com/sirupsen/logrus"
)

// checkMonitor warns, once at start, when a worker systemd started runs
// without config.MonitorTrace: a GODEBUG in the environment file replaces
// the unit's. A worker started by hand is not told: it is not in a pool.
func checkMonitor(godebug string, activated bool, log *logrus.Entry) {
	if !activated || config.MonitorAwake(godebug) {
		return
	}
	log.WithField("GODEBUG", godebug).Warn("GODEBUG has no schedtrace: " + config.MonitorAdvice)
}
