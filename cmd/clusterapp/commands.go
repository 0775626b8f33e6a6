package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/worker"
	"github.com/spf13/cobra"
)

// newRootCommand builds the command tree. Output goes to stdout (help
// included: `clusterapp --help | less` works) and stderr; errors are not
// printed here but returned, for main to print once and map to an exit
// status.
func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "clusterapp",
		Short: "HTTP worker pool run by systemd as its master",
		Long: `clusterapp is an HTTP service in which systemd owns the listening socket
(clusterapp.socket) and starts one socket-activated worker per core
(clusterapp-worker@N.service). Without a command it runs a worker, as serve does.

All settings are CLUSTERAPP_* environment variables, read from
/etc/clusterapp/clusterapp.env under systemd: see 'clusterapp config'.

Exit status: 0 on success, 1 on failure, 2 for a bad command line,
78 (EX_CONFIG) for an invalid configuration.`,
		Example: `  clusterapp status             # one line per worker, and the socket's accept queue
  clusterapp reload             # rolling restart, each worker gated on READY=1
  clusterapp scale 4            # four workers, persistently
  clusterapp logs -f --worker 2 # follow worker 2's journal
  clusterapp help status        # a command's flags and examples`,
		Version: version,
		// "stauts" suggests status, as git does.
		SuggestionsMinimumDistance: 2,
		Args:                       noCommand,
		SilenceErrors:              true,
		SilenceUsage:               true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), worker.DefaultName(), stderr)
		},
	}
	// The packages install the completions: `clusterapp completion bash`
	// works but stays out of the help, which is about the pool.
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usagef(cmd, "%v", err)
	})
	root.AddCommand(
		newServeCommand(stderr),
		newConfigCommand(),
		newGeneratorCommand(stderr),
		newStatusCommand(),
		newReloadCommand(),
		newScaleCommand(),
		newLogsCommand(),
		newDoctorCommand(),
		newExitedCommand(stderr),
		newVersionCommand(),
	)
	root.AddCommand(docsCommands()...) // none in the shipped binary (docs.go)
	refuseUnknownHelpTopics(root)
	return root
}

// refuseUnknownHelpTopics makes `clusterapp help nosuch` the usage error
// that `clusterapp nosuch` is (exit 2, the name, suggestions): cobra's own
// help command prints the root's help and exits 0 for a topic it does not
// know, so a typo in a script passed. Its Run and completion are kept;
// cobra re-adds the same command at Execute, with these Args.
func refuseUnknownHelpTopics(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			c.Args = helpTopic
		}
	}
}

// helpTopic accepts a path of existing commands ("status", or nothing for
// the root); what is left over is an unknown command of the last one found.
func helpTopic(cmd *cobra.Command, args []string) error {
	topic, rest, err := cmd.Root().Find(args)
	if err != nil {
		return usagef(cmd, "%v", err)
	}
	return noCommand(topic, rest)
}

// exclusiveFlags makes names modes of cmd of which one at most may be
// given: two together are a usage error naming both, where the command
// would run the first its code checks and silently drop the other. Marked
// as a cobra flag group too, so completion offers no second mode; the
// check runs in PreRunE, before cobra's own (whose error is not a
// usageError), so it must be called after the flags are defined.
func exclusiveFlags(cmd *cobra.Command, names ...string) {
	cmd.MarkFlagsMutuallyExclusive(names...)
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		var set []string
		for _, name := range names {
			if cmd.Flags().Changed(name) {
				set = append(set, "--"+name)
			}
		}
		if len(set) > 1 {
			return usagef(cmd, "%s and %s do not go together", set[0], set[1])
		}
		return nil
	}
}

// positiveDuration refuses a timeout flag of zero or less up front: such a
// deadline has expired before the first job, which would fail only after
// the command had changed something (scale writes its file first).
func positiveDuration(cmd *cobra.Command, name string, d time.Duration) error {
	if d > 0 {
		return nil
	}
	return usagef(cmd, "--%s=%v: expected a positive duration, such as 30s", name, d)
}

// usagef is a usageError prefixed with the subcommand's name.
func usagef(cmd *cobra.Command, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cmd.HasParent() {
		msg = cmd.Name() + ": " + msg
	}
	return usageError{msg: msg, help: cmd.CommandPath()}
}

// noCommand refuses arguments to the root command: the first one is a
// command that does not exist.
func noCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, ", "))
	}
	return usagef(cmd, "%s", msg)
}

// noArgs is cobra.NoArgs as a usageError naming the command.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef(cmd, "unexpected argument %q: it takes flags only", args[0])
	}
	return nil
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version (as --version does)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "clusterapp", version)
			return err
		},
	}
}
