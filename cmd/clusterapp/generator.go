package main

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/config/generator"
	"github.com/clusterapp/clusterapp/service/worker/logging"
	"github.com/coreos/go-systemd/v22/journal"
	"github.com/spf13/cobra"
)

// generatorName is the name the binary is installed under in
// /usr/lib/systemd/system-generators (a symlink to /usr/bin/clusterapp):
// invoked by that name it runs as the generator.
const generatorName = "clusterapp-generator"

// newGeneratorCommand is the generator's command line: the output
// directories systemd passes (systemd.generator(7)).
func newGeneratorCommand(stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "generator NORMAL-DIR [EARLY-DIR LATE-DIR]",
		Short: "Write the units' drop-ins from " + config.EnvFile,
		Long: `The systemd generator: write the drop-ins that apply ` + config.EnvFile + `
(and the scale file) to the units: the worker count, the listen addresses, the
watchdog and the limits. systemd runs it at boot and at every daemon-reload as
/usr/lib/systemd/system-generators/` + generatorName + `, a symlink to this binary,
with its three output directories; clusterapp writes to the first. An invalid
setting is logged as a warning and replaced by its default.`,
		Example: `  clusterapp generator /tmp/out   # see what it would write`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 && len(args) != 3 {
				return usagef(cmd, "expected the output directories systemd passes (normal [early late]), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return runGenerator(args, stderr)
		},
	}
}

// runGenerator implements the systemd generator protocol: three output
// directories (normal, early, late); clusterapp writes to the normal one.
func runGenerator(args []string, stderr io.Writer) error {
	// Every problem is an invalid setting; a note is a skipped line or an
	// unknown variable, which has no event of its own.
	warn := generatorLog(journal.PriWarning, logging.MsgInvalidConfig, stderr)
	note := generatorLog(journal.PriNotice, "", stderr)
	return generator.Run(config.EnvFile, args[0], runtime.NumCPU(), warn, note)
}

// generatorLog returns a function that logs one line where an operator will
// find it. systemd 252 gives generators its own stdout and stderr (the
// console), so a line is sent to the journal directly when journald is
// there (every `systemctl daemon-reload`), else to the kernel log, which
// journald reads once it starts (the first run, early at boot), else to
// stderr. systemd's own system generators write to the kernel log only, to
// never wait on a service while PID 1 waits on them; a datagram to
// journald's socket (an 8 MiB receive buffer) waits only if journald has
// stopped reading, and the kernel log rate-limits writers to about ten lines
// in five seconds, which a file with many problems exceeds. The journal
// first, then; there the line carries messageID as MESSAGE_ID= unless it is
// empty (package logging lists the ids).
func generatorLog(priority journal.Priority, messageID string, stderr io.Writer) func(string) {
	return func(msg string) {
		if journal.Enabled() {
			fields := map[string]string{"SYSLOG_IDENTIFIER": generatorName}
			if messageID != "" {
				fields["MESSAGE_ID"] = messageID
			}
			if err := journal.Send(msg, priority, fields); err == nil {
				return
			}
		}
		if kmsg, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); err == nil {
			_, err = fmt.Fprintf(kmsg, "<%d>%s: %s\n", priority, generatorName, msg)
			_ = kmsg.Close() // written or not, stderr is next
			if err == nil {
				return
			}
		}
		fmt.Fprintf(stderr, "%s: %s\n", generatorName, msg)
	}
}
