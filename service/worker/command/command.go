// Package command is the command line of a program built on package worker:
// the commands its units run, and nothing else.
//
//	NAME [serve] [--instance N]   run one worker (the unit's ExecStart=)
//	NAME exited --instance N      count how worker N ended (ExecStopPost=)
//	NAME metrics                  serve the pool's metrics (clusterapp-metrics.service)
//	NAME --version                print NAME and its version
//
// The shipped pool runs clusterapp-worker, which is this command line over
// the seed routes (package app); a service of one's own (docs/own-handler.md)
// is this command line over its routes. The operator's commands live in
// another binary (clusterapp): a worker process is exec'd at every start and
// restart, and what it does not link it does not load. On the 2-CPU guest of
// docs/benchmarks.md, cold-started under the worker unit's hardening 15
// times each, taking turns, the worker without the operator's commands (no
// command tree, D-Bus, journal reader, generator; 9.7 MB instead of 13.2 MB)
// answered its first request after 88.3 ms (median), `clusterapp serve`
// after 92.3 ms, and bare net/http after 79.3 ms.
//
// The standard library's flag package parses the line, so -instance and
// --instance, "--instance N" and "--instance=N" are all accepted.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker"
)

// Exit statuses, so the units and scripts can tell failures apart.
const (
	ExitFailure = 1
	ExitUsage   = 2
	// ExitConfig is EX_CONFIG from sysexits.h: the configuration is invalid
	// and restarting will not help until it is fixed.
	ExitConfig = 78
)

// Program is what a worker program serves and how it names itself.
type Program struct {
	// Name is the program's name in messages and usage (clusterapp-worker).
	Name string
	// Version is printed by --version and given to worker.Run.
	Version string
	// Routes are the service's routes: the same for serve, exited and
	// metrics, so all three use the same metrics table.
	Routes worker.Routes
}

// usageError is a bad command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// errVersion ends a command line that asked for the version.
var errVersion = errors.New("version printed")

// Main runs the command args names and returns the program's exit status:
// 0 after a clean drain (or help, or the version), 78 (EX_CONFIG) for an
// invalid setting, 2 for a bad command line, 1 for any other failure. Each
// failure is one line on stderr, unless the worker already logged it.
func Main(ctx context.Context, p Program, args []string, stdout, stderr io.Writer) int {
	return p.exitCode(p.run(ctx, args, stdout, stderr), stderr)
}

// exitCode reports err on one line of stderr and maps it to the exit status.
func (p Program) exitCode(err error, stderr io.Writer) int {
	var ce *worker.ConfigError
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp), errors.Is(err, errVersion):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\nRun '%s -h' for usage.\n", p.Name, err, p.Name)
		return ExitUsage
	case errors.As(err, &ce):
		if !ce.Logged {
			fmt.Fprintf(stderr, "%s: %v\n", p.Name, err)
		}
		return ExitConfig
	}
	fmt.Fprintf(stderr, "%s: %v\n", p.Name, err)
	return ExitFailure
}

// run parses the command line and runs the command it names: serve (the
// default), exited or metrics.
func (p Program) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	command := "serve"
	if len(args) > 0 && (args[0] == "serve" || args[0] == "exited" || args[0] == "metrics") {
		command, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet(p.Name+" "+command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [serve] [--instance N]   run one worker\n       %s exited --instance N      count how worker N ended (ExecStopPost=)\n       %s metrics                  serve the pool's metrics (clusterapp-metrics.service)\n       %s --version\n", p.Name, p.Name, p.Name, p.Name)
		fs.PrintDefaults()
	}
	instance := fs.String("instance", "", "the worker's `name` (the unit's %i): X-Worker, logs, metrics; 1 to 1024 shares the pool's tables (default pid-N)")
	version := fs.Bool("version", false, "print the program's name and version, and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q: settings are CLUSTERAPP_* environment variables", fs.Arg(0))}
	}
	if *version {
		fmt.Fprintf(stdout, "%s %s\n", p.Name, p.Version)
		return errVersion
	}
	if *instance != "" && !config.ValidInstance(*instance) {
		return usageError{fmt.Sprintf("--instance %q: expected letters, digits, '.', '_', '-' or '@', at most 64 of them", *instance)}
	}
	switch {
	case command == "metrics" && *instance != "":
		return usageError{"metrics: --instance is a worker's: the exporter serves every worker's numbers"}
	case command == "metrics":
		return worker.Export(ctx, worker.ExportOptions{Version: p.Version, Routes: p.Routes, Stderr: stderr})
	case command == "exited":
		if *instance == "" {
			return usageError{"exited: --instance is required (the worker unit's ExecStopPost= passes %i)"}
		}
		return worker.RecordExit(ctx, *instance, p.Routes, stderr)
	}
	return worker.Run(ctx, worker.Options{Name: *instance, Version: p.Version, Routes: p.Routes, Stderr: stderr})
}
