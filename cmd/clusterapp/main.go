// Command clusterapp is the clusterapp worker and its operator tools.
//
// `clusterapp serve` runs a worker on the listening socket systemd passes it
// (bare `clusterapp` serves too); the units run the same worker from
// cmd/clusterapp-worker, which leaves the operator's tools out. Other subcommands
// inspect the configuration without starting anything; status, reload,
// scale, logs and doctor operate the pool through systemd (D-Bus, journal).
//
// The command line is a cobra tree (commands.go helpers, one file per
// subcommand): help on every command, flags anywhere, and the man page and
// shell completions generated from the same definitions (docs.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// usageError is a bad command line; help is the command whose --help
// explains it (filled in by run).
type usageError struct{ msg, help string }

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
	os.Exit(exitCode(run(context.Background(), args, os.Stdout, os.Stderr), os.Stderr))
}

// exitCode reports err on one line of stderr and maps it to the exit status.
func exitCode(err error, stderr io.Writer) int {
	var ue usageError
	var ce configError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "clusterapp: %v\nRun '%s --help' for usage.\n", err, ue.help)
		return exitUsage
	case errors.As(err, &ce):
		if !ce.logged {
			fmt.Fprintf(stderr, "clusterapp: %v\n", err)
		}
		return exitConfig
	}
	fmt.Fprintf(stderr, "clusterapp: %v\n", err)
	return exitFailure
}

// run parses args with the command tree and runs the command they name;
// bare `clusterapp` serves.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var ue usageError
	if errors.As(err, &ue) && ue.help == "" {
		ue.help = cmd.CommandPath()
		return ue
	}
	return err
}
