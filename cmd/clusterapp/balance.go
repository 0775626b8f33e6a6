package main

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/clusterapp/clusterapp/service/balance"
	"github.com/clusterapp/clusterapp/service/config"
	"github.com/sirupsen/logrus"
)

// balanceTableFile is the shared connection table, in the units' common
// RuntimeDirectory ($RUNTIME_DIRECTORY, /run/clusterapp).
const balanceTableFile = "balance.table"

// newBalancer opens the shared balance table when balancing can work: it is
// on, the workers share a runtime directory, and the instance is a worker
// number. Otherwise it returns nil (accept as the kernel decides) and says
// why. The table stays mapped until the process exits.
func newBalancer(cfg config.Config, instance string, log *logrus.Entry) (*balance.Balancer, error) {
	if !cfg.Balance {
		return nil, nil
	}
	dir := os.Getenv("RUNTIME_DIRECTORY")
	n, err := strconv.Atoi(instance)
	switch {
	case dir == "":
		log.Info("balancing off: no RUNTIME_DIRECTORY shared with the other workers (standalone)")
		return nil, nil
	case err != nil || n < 1 || n > balance.Slots:
		log.WithField("instance", instance).Warnf("balancing off: the instance must be a worker number from 1 to %d", balance.Slots)
		return nil, nil
	}
	b, _, err := balance.Open(filepath.Join(dir, balanceTableFile), balance.Options{Self: n - 1, MaxDefer: cfg.BalanceMaxDefer})
	if err != nil {
		return nil, err
	}
	return b, nil
}
