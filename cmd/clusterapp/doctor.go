package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/clusterapp/clusterapp/service/doctor"
	"github.com/clusterapp/clusterapp/service/generator"
)

// runDoctor checks that the configuration is in effect; it fails (exit 1)
// when a check finds a problem.
func runDoctor(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError{"doctor: usage: clusterapp doctor"}
	}
	c, err := dialUnits(ctx, "doctor")
	if err != nil {
		return err
	}
	defer c.Close()
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	facts, err := doctor.Gather(qctx, c, generator.EnvFile)
	if err != nil {
		return fmt.Errorf("doctor: %w", err)
	}
	findings := doctor.Evaluate(facts)
	for _, f := range findings {
		fmt.Fprintf(stdout, "%-4s  %-12s  %s\n", f.Severity, f.Check, f.Detail)
		if f.Fix != "" {
			fmt.Fprintf(stdout, "      %-12s  fix: %s\n", "", f.Fix)
		}
	}
	if n := doctor.Problems(findings); n > 0 {
		return fmt.Errorf("doctor: %d problem(s) found", n)
	}
	_, err = fmt.Fprintln(stdout, "all checks passed")
	return err
}
