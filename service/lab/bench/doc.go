// Package bench runs the benchmark behind `make bench` and renders its
// report: the suite booted in a sandbox (a real systemd as PID 1 of private
// namespaces, scripts/sandbox), loaded from inside that box by the project's
// own generator (clusterapp-load), one configuration after another.
//
// A Configuration is nothing but the body of /etc/clusterapp/clusterapp.env,
// the file an operator edits: switching to it writes the file, runs
// `systemctl daemon-reload` (the generator turns CLUSTERAPP_WORKERS into the
// target's Wants=), stops every worker and starts clusterapp.target again, so
// each configuration is measured on fresh processes. Comparing a new knob
// (say a balancing mode) is one more line in DefaultConfigurations.
//
// Three scenarios follow one another: the configurations (closed-loop
// throughput, repeated and reported as medians, fixed-rate latency, share,
// memory); the spike (SpikePlan: a CPU route at 10x its sustainable rate,
// protection on in rounds reported by their median, then off, with the
// generator on a CPU of its own, SpikeLayout); and the faults (FaultPlan:
// the pool under new-connection load with one worker frozen, then
// crash-looping).
//
// Every number in the report is also given as a ratio against a baseline
// measured in the same run (N workers against 1 worker, against one process
// with GOMAXPROCS=N; admitted p99 under a spike against the unloaded p99),
// because absolute numbers from a shared 2-core machine say little on their
// own. Nothing here asserts a timing: the benchmark reports, and fails only
// when a run could not be made (a box that did not boot, a worker that did
// not start, a generator that did not answer).
//
// The pure parts (ratios, share, tables, the SVG chart, parsing of
// /proc/PID/status) are unit tested; the box is driven by package
// sandbox's Driver, whose function seam the tests fake.
package bench
