// Package worker is clusterapp's worker runtime as a library: any Go
// service gets the suite's systemd integration by handing its routes to
// Run.
//
//	err := worker.Run(ctx, worker.Options{Name: name, Routes: routes})
//
// Run is what each clusterapp-worker@N.service runs: it serves on the
// listening sockets systemd passes (socket activation; it binds
// CLUSTERAPP_LISTEN itself without systemd), sends READY=1 only after a
// health probe through the whole handler stack answers, pings the watchdog
// only while probes keep answering, reports its load in STATUS=, and on
// SIGTERM drains without losing a request. Under the units it also
// balances new connections between the workers, shares one rate limit and
// one metrics table with them, recycles itself after CLUSTERAPP_MAX_REQUESTS,
// and slows a crash loop down.
//
// # The way a request travels
//
// systemd's socket -> listen (the inherited socket) -> exclusive (one
// worker woken per new connection) -> balance (the accept gate) -> server
// (connection tracking, drain, keep-alive bound; rawio's reads and writes at
// one P; deadlines handed to the socket only when I/O needs them) -> Stack:
// common headers and body cap -> access log -> ratelimit -> admission ->
// routing with per-route metrics -> the request deadline on computing
// routes -> the service's handler. Beside it: package config feeds every
// part at start; notify and watchdog report to systemd; the watchdog's
// probe (package probe) goes through the same Stack a client reaches.
//
// # What a service provides
//
// Routes: exact paths, their methods and handlers (Route), built once on the
// worker's tools (Tools: settings, logger, the response cache). The worker
// adds its own routes: /healthz (liveness, the watchdog's probe), /readyz
// (readiness) and, behind CLUSTERAPP_DEBUG_ENDPOINTS, the fault-injection
// routes /debug/crash, /debug/hang and /debug/leak. Errors the worker writes
// are JSON ({"error": ..., "status": ...}); Error writes the same shape for
// a service.
//
// # What it owns
//
// The policies that used to live in the command: the runtime directory
// (read once; without it a worker keeps its tables to itself), GOMAXPROCS
// (the admission slots, plus a spare P while long requests fill them:
// admission.Governor), GOMEMLIMIT from the cgroup, the STATUS= line
// (package status, written and parsed side by side). Nothing in it exits
// the process: Run returns, and the program maps the error to its exit
// status (ConfigError to 78, EX_CONFIG).
//
// cmd/clusterapp-worker (what the units run, package command's command
// line) and `clusterapp serve` run the seed service (package app) on it;
// docs/own-handler.md says how to run another program on the shipped units,
// and cmd/clusterapp-hello is one.
package worker
