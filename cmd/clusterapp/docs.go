//go:build mandocs

// The man page generator is built only with -tags mandocs (make build's
// bin/clusterapp-docs, which packaging/build runs): its renderer, go-md2man
// on blackfriday, builds tables at package initialisation (HTML entities,
// block tags) that every start of the shipped binary paid, about 2 ms of its
// ~10 ms of initialisers on a 2-CPU VM, for a command only packaging runs.
// docs_shipped.go is the shipped binary's side: no docs command.

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docsCommands is the docs command, in this build.
func docsCommands() []*cobra.Command { return []*cobra.Command{newDocsCommand()} }

// newDocsCommand writes the man page and the shell completions generated
// from the command tree, so they cannot drift from it. Hidden: packaging/build
// runs it (bin/clusterapp-docs) and ships the files; operators use man and
// their shell.
func newDocsCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "docs DIR",
		Short:  "Write clusterapp.8 and the bash, zsh and fish completions into DIR",
		Hidden: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef(cmd, "expected one argument, the output directory")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeDocs(cmd.Root(), args[0])
		},
	}
}

// docFiles are the files writeDocs writes, by name.
var docFiles = map[string]func(root *cobra.Command, w io.Writer) error{
	"clusterapp.8":    writeManPage,
	"clusterapp.bash": func(root *cobra.Command, w io.Writer) error { return root.GenBashCompletionV2(w, true) },
	"_clusterapp":     func(root *cobra.Command, w io.Writer) error { return root.GenZshCompletion(w) },
	"clusterapp.fish": func(root *cobra.Command, w io.Writer) error { return root.GenFishCompletion(w, true) },
}

func writeDocs(root *cobra.Command, dir string) error {
	for name, gen := range docFiles {
		var b bytes.Buffer
		if err := gen(root, &b); err != nil {
			return fmt.Errorf("docs: %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("docs: %w", err)
		}
	}
	return nil
}

// writeManPage writes clusterapp(8): every visible command with its flags
// and examples on one page, as markdown rendered by go-md2man (what
// cobra/doc uses; cobra/doc itself writes one page per command). The date is
// SOURCE_DATE_EPOCH's when set, so two builds of a commit are identical.
func writeManPage(root *cobra.Command, w io.Writer) error {
	date := time.Now()
	if epoch := os.Getenv("SOURCE_DATE_EPOCH"); epoch != "" {
		sec, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", epoch, err)
		}
		date = time.Unix(sec, 0)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%% \"CLUSTERAPP\" \"8\" \"%s\" \"clusterapp %s\" \"System Administration\"\n", date.UTC().Format("2006-01-02"), version)
	fmt.Fprintf(&b, "# NAME\nclusterapp \\- %s\n\n", root.Short)
	fmt.Fprintf(&b, "# SYNOPSIS\n**clusterapp** [*COMMAND*] [*FLAGS*] [*ARGUMENTS*]\n\n")
	fmt.Fprintf(&b, "# DESCRIPTION\n%s\n\n", root.Long)
	// cobra adds these to the command it executes (docs), not to the root.
	root.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	b.WriteString("# OPTIONS\n")
	manFlags(&b, root.Flags(), true)
	b.WriteString("# COMMANDS\n")
	for _, c := range root.Commands() {
		manCommand(&b, c)
	}
	fmt.Fprintf(&b, "# EXAMPLES\n```\n%s\n```\n\n", root.Example)
	b.WriteString(manTail)
	_, err := w.Write(md2man.Render([]byte(b.String())))
	return err
}

// manCommand documents c and its visible subcommands.
func manCommand(b *strings.Builder, c *cobra.Command) {
	if !c.IsAvailableCommand() {
		return
	}
	fmt.Fprintf(b, "### %s\n**%s**\n\n", c.Name(), c.UseLine())
	if c.Long != "" {
		fmt.Fprintf(b, "%s\n\n", c.Long)
	} else {
		fmt.Fprintf(b, "%s.\n\n", c.Short)
	}
	manFlags(b, c.LocalNonPersistentFlags(), false)
	if c.Example != "" {
		fmt.Fprintf(b, "Examples:\n```\n%s\n```\n\n", c.Example)
	}
	for _, sub := range c.Commands() {
		manCommand(b, sub)
	}
}

// manFlags lists flags; --help is listed once, with the root's.
func manFlags(b *strings.Builder, flags *pflag.FlagSet, withHelp bool) {
	flags.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" && !withHelp {
			return
		}
		name, usage := pflag.UnquoteUsage(f)
		fmt.Fprintf(b, "**--%s**", f.Name)
		if f.Shorthand != "" {
			fmt.Fprintf(b, ", **-%s**", f.Shorthand)
		}
		if name != "" {
			fmt.Fprintf(b, " *%s*", name)
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(b, "\n: %s\n\n", usage)
	})
}

// manTail is the end of the man page: what is not a flag.
const manTail = `# EXIT STATUS
**0** on success; **1** when the command failed (a worker did not come back, doctor found a
problem, systemd could not be reached); **2** for a bad command line; **78** (EX_CONFIG)
for an invalid configuration.

# FILES
*/etc/clusterapp/clusterapp.env*
: the operator's settings, CLUSTERAPP_* variables read by the units, the generator and
the workers

*/etc/clusterapp/scale.env*
: the worker count written by **clusterapp scale**, read after the operator's file

*/usr/share/doc/clusterapp/clusterapp.env.example*
: every variable with its default and what it does

# SEE ALSO
**systemctl**(1), **journalctl**(1), **systemd.socket**(5), **systemd.generator**(7),
*/usr/share/doc/clusterapp/README.md*
`
