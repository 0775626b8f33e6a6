// Command clusterapp is the clusterapp worker and its operator tools.
//
// Every clusterapp-worker@N.service runs `clusterapp serve` (the default
// subcommand) on the listening socket systemd passes it. Other subcommands
// inspect the configuration without starting anything; status, reload,
// scale, logs and doctor operate the pool through systemd (D-Bus, journal).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses, so systemd units and scripts can tell failures apart.
const (
	exitFailure = 1
	exitUsage   = 2
	// exitConfig is EX_CONFIG from sysexits.h: the configuration is invalid
	// and restarting will not help until it is fixed.
	exitConfig = 78
)

// usageError is a bad command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// configError is an invalid configuration; logged says it was already
// written to stderr, so main does not repeat it.
type configError struct {
	err    error
	logged bool
}

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

func main() {
	args := os.Args[1:]
	if filepath.Base(os.Args[0]) == generatorName {
		args = append([]string{"generator"}, args...)
	}
	err := run(context.Background(), args, os.Stdout, os.Stderr)
	code := 0
	var ue usageError
	var ce configError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "clusterapp: %v\nRun 'clusterapp help' for usage.\n", err)
		code = exitUsage
	case errors.As(err, &ce):
		if !ce.logged {
			fmt.Fprintf(os.Stderr, "clusterapp: %v\n", err)
		}
		code = exitConfig
	default:
		fmt.Fprintf(os.Stderr, "clusterapp: %v\n", err)
		code = exitFailure
	}
	os.Exit(code)
}

// run dispatches to a subcommand; "serve" is the default.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	name := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	switch name {
	case "serve":
		return runServe(ctx, args, stderr)
	case "config":
		return runConfig(args, stdout)
	case "generator":
		return runGenerator(args, stderr)
	case "status":
		return runStatus(ctx, args, stdout)
	case "reload":
		return runReload(ctx, args, stdout)
	case "scale":
		return runScale(ctx, args, stdout)
	case "logs":
		return runLogs(ctx, args, stdout)
	case "doctor":
		return runDoctor(ctx, args, stdout)
	case "exited":
		return runExited(args, stderr)
	case "version":
		_, err := fmt.Fprintln(stdout, "clusterapp", version)
		return err
	case "help":
		_, err := io.WriteString(stdout, usage)
		return err
	}
	return usageError{fmt.Sprintf("unknown command %q: expected one of serve, config, generator, status, reload, scale, logs, doctor, exited, version, help", name)}
}

const usage = `Usage: clusterapp [COMMAND] [FLAGS]

Commands:
  serve                 run a worker (the default): serve HTTP on the sockets systemd
                        passes (LISTEN_FDS), or bind CLUSTERAPP_LISTEN without systemd
  config [--file FILE]  print every CLUSTERAPP_* variable: default, value in effect (the env
                        file, default /etc/clusterapp/clusterapp.env, read as systemd reads it)
  config --env          the same for this process's environment (a standalone worker)
  config --check FILE   validate an environment file without starting anything: exit 78
                        when a value is invalid, saying what each one will do
  config --env-template print the commented environment file shipped in /etc/clusterapp
  config --markdown     print the variables as a markdown table
  config --markdown-invalid
                        print what an invalid value of each variable does
  generator DIR [E L]   write the units' drop-ins from /etc/clusterapp/clusterapp.env
                        (run by systemd as /usr/lib/systemd/system-generators/clusterapp-generator)
  status [--json]       one line per worker (state, PID, uptime, restarts, memory, CPU,
                        requests served and in flight) and the socket's accept queue
  reload [--max-unavailable K]
                        rolling restart, K workers at a time (default 1), each waiting
                        for the new process's READY=1; stops at the first failure
  scale N               set CLUSTERAPP_WORKERS=N in the env file and start or drain
                        only the instances that change
  logs [-f] [--worker N] [--since TIME] [-n N]
                        the workers' journal, merged, each line naming its worker
  doctor                check that the configuration is in effect (sysctls, limits,
                        socket, workers, hardening); exit 1 with fixes when not
  exited --instance N   count how worker N's process ended ($SERVICE_RESULT) in the pool's
                        metrics (run by the worker unit's ExecStopPost=)
  version               print the version
  help                  print this help

All settings are environment variables; see 'clusterapp config'.
`
