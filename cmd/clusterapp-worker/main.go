// Command clusterapp-worker is the pool's worker process: the seed routes
// (package app) on the worker runtime (package worker), which every
// clusterapp-worker@N.service runs. It is `clusterapp serve` without the
// operator's commands, so that a start or restart loads less (package
// command says what that saves); the operator's commands stay in
// clusterapp.
//
//	clusterapp-worker [serve] [--instance N]   run one worker (ExecStart=)
//	clusterapp-worker exited --instance N      count how worker N ended (ExecStopPost=)
//	clusterapp-worker --version
//
// The packages install it as /usr/libexec/clusterapp-worker: the units run
// it, an operator does not. Settings are the CLUSTERAPP_* environment
// variables (`clusterapp config` lists them).
//
// Exit status: 0 after a clean drain, 78 (EX_CONFIG) for an invalid setting,
// 1 for any other failure, 2 for a bad command line.
package main

import (
	"context"
	"os"

	"github.com/clusterapp/clusterapp/service/app"
	"github.com/clusterapp/clusterapp/service/worker/command"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	p := command.Program{Name: "clusterapp-worker", Version: version, Routes: app.Routes}
	os.Exit(command.Main(context.Background(), p, os.Args[1:], os.Stdout, os.Stderr))
}
