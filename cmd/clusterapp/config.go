package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/config/generator"
	"github.com/clusterapp/clusterapp/service/ops/units"
	"github.com/spf13/cobra"
)

// newConfigCommand prints or checks the configuration.
func newConfigCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show every setting, its default and the value in effect, or check a file",
		Long: `Print every CLUSTERAPP_* variable: its default and the value in effect, reading the
environment file (default ` + config.EnvFile + `) as systemd reads it, then the
scale file; running workers started with other values are named. Without root or
systemd, that last part is left out.

--check validates an environment file without starting anything: exit 78 when a
value is invalid, saying what each invalid value will do. The other flags print
the documentation generated from the code. The flags are modes: one at a time.`,
		Example: `  clusterapp config
  clusterapp config --check /etc/clusterapp/clusterapp.env
  clusterapp config --env-template > clusterapp.env`,
		Args: noArgs,
	}
	f := cmd.Flags()
	check := f.String("check", "", "validate this environment `file` and exit (78 when a value is invalid)")
	file := f.String("file", config.EnvFile, "show the settings of this environment `file`")
	fromEnv := f.Bool("env", false, "show the settings of this process's environment instead of a file (a standalone worker)")
	template := f.Bool("env-template", false, "print the commented environment file")
	markdown := f.Bool("markdown", false, "print a markdown table of the variables")
	invalid := f.Bool("markdown-invalid", false, "print a markdown table of what invalid values do")
	exclusiveFlags(cmd, "check", "file", "env", "env-template", "markdown", "markdown-invalid")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		// An empty path (--check "", --check= from an unset variable)
		// would otherwise show the default file and exit 0, a pass.
		for name, path := range map[string]string{"check": *check, "file": *file} {
			if f.Changed(name) && path == "" {
				return usagef(cmd, "--%s needs a file path", name)
			}
		}
		stdout := cmd.OutOrStdout()
		switch {
		case f.Changed("check"):
			return checkFile(*check, stdout)
		case *template:
			return config.WriteEnvTemplate(stdout)
		case *markdown:
			return config.WriteMarkdown(stdout)
		case *invalid:
			return config.WriteInvalidMarkdown(stdout)
		case *fromEnv:
			return printEnvConfig(stdout)
		}
		return printFileConfig(*file, stdout)
	}
	return cmd
}

// printFileConfig shows every variable with its default and the value in
// effect for the workers and units, reading the file as systemd does.
func printFileConfig(path string, stdout io.Writer) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stdout, "%s does not exist: every variable has its default\n\n", path)
	}
	s := generator.Read(path, config.ScaleFileFor(path))
	if err := printTable(stdout, s.Config, s.Set, s.Invalid); err != nil {
		return err
	}
	if err := report(stdout, path, s.Notes, s.Problems); err != nil {
		return err
	}
	if path == config.EnvFile {
		running(stdout, s.Set)
	}
	return nil
}

// running says which running workers were started with other settings
// than the files now give (their environment, /proc/PID/environ): those
// apply at each worker's restart (`clusterapp reload`). It says nothing when
// it cannot look (not root, systemd not running, no worker).
func running(stdout io.Writer, want map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	c, err := units.Dial(ctx)
	if err != nil {
		return
	}
	defer c.Close()
	ws, err := c.Workers(ctx)
	if err != nil {
		return
	}
	for _, w := range ws {
		if w.PID == 0 {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", w.PID))
		if err != nil {
			continue
		}
		have := map[string]string{}
		for _, kv := range strings.Split(string(env), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, config.Prefix+"_") && v != "" {
				have[k] = v
			}
		}
		var diffs []string
		for _, v := range config.Vars() {
			if _, set := want[v.Key]; !set && v.Key == generator.WorkerDefaultKey {
				continue // the generator's Environment= default
			}
			if have[v.Key] != want[v.Key] {
				diffs = append(diffs, fmt.Sprintf("%s=%q (files: %q)", v.Key, have[v.Key], want[v.Key]))
			}
		}
		if len(diffs) > 0 {
			fmt.Fprintf(stdout, "worker %d (pid %d) runs with %s: it applies them at its restart (clusterapp reload)\n", w.Number, w.PID, strings.Join(diffs, ", "))
		}
	}
}

// printEnvConfig is printFileConfig for this process's environment, as a
// standalone worker reads it.
func printEnvConfig(stdout io.Writer) error {
	c, err := config.Load()
	set := map[string]string{}
	var keys []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
		if strings.HasPrefix(k, config.Prefix+"_") && v != "" {
			set[k] = v
		}
	}
	var problems []string
	invalid := map[string]bool{}
	var ce *config.Error
	if errors.As(err, &ce) {
		for _, p := range ce.Problems {
			problems = append(problems, p.String())
			invalid[p.Key] = true
		}
	}
	if perr := printTable(stdout, c, set, invalid); perr != nil {
		return perr
	}
	notes := config.Unknown(keys)
	if v, ok := os.LookupEnv(config.GOMAXPROCS); ok && !config.GOMAXPROCSApplies(v) {
		notes = append(notes, fmt.Sprintf("%s=%q: %s", config.GOMAXPROCS, v, config.GOMAXPROCSAdvice))
	}
	if a := config.MaxRSSAdvice(set[config.Prefix+"_MAX_RSS"], set[config.Prefix+"_MEMORY_MAX"], config.PhysicalMemory()); a != "" {
		notes = append(notes, a)
	}
	return report(stdout, "the environment", notes, problems)
}

// printTable shows each variable's default and effective value; one the
// environment sets is marked so, with the value as written when that is
// another form of it (yes for true, 65536 for 64KiB) or invalid.
func printTable(stdout io.Writer, c config.Config, set map[string]string, invalid map[string]bool) error {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tEFFECTIVE\tDESCRIPTION")
	for _, v := range config.Vars() {
		eff := c.Value(v)
		if raw, ok := set[v.Key]; ok {
			switch {
			case invalid[v.Key]:
				eff += fmt.Sprintf(" (set to %q: invalid)", raw)
			case raw == eff:
				eff += " (set)"
			default:
				eff += fmt.Sprintf(" (set as %q)", raw)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Key, orDash(v.Default), orDash(eff), v.Description)
	}
	return tw.Flush()
}

// report prints notes and problems after the table; problems make it a
// configError (exit 78).
func report(stdout io.Writer, source string, notes, problems []string) error {
	for _, n := range notes {
		fmt.Fprintln(stdout, "warning: "+n)
	}
	for _, p := range problems {
		fmt.Fprintln(stdout, "error: "+p)
	}
	if len(problems) > 0 {
		return configError{err: fmt.Errorf("%s: %d invalid setting(s)", source, len(problems))}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// checkFile validates an environment file as systemd, the generator and the
// workers will read it: lines systemd skips and unknown variables are
// warnings; invalid values are errors, each saying what it will do. Like
// the generator, it reads the scale file beside it (clusterapp scale's)
// after it: a value there wins, and a problem there is the pool's too.
func checkFile(path string, stdout io.Writer) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	s := generator.Read(path, config.ScaleFileFor(path))
	notes := s.Notes
	if n := s.ProcsNote(runtime.NumCPU()); n != "" {
		notes = append(notes, n)
	}
	if godebug, ok := s.Set["GODEBUG"]; ok && !config.MonitorAwake(godebug) {
		notes = append(notes, fmt.Sprintf("GODEBUG=%q has no schedtrace: %s", godebug, config.MonitorAdvice))
	}
	if a := config.MaxRSSAdvice(s.Set[config.Prefix+"_MAX_RSS"], s.Set[config.Prefix+"_MEMORY_MAX"], config.PhysicalMemory()); a != "" {
		notes = append(notes, a)
	}
	if err := report(stdout, path, notes, s.Problems); err != nil {
		return err
	}
	_, err := fmt.Fprintf(stdout, "%s: ok (%d variables set)\n", path, len(s.Set))
	return err
}
