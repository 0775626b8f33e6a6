package main

import (
	"context"
	"encoding/json"
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
	asJSON := fs.Bool("json", false, "print the findings as JSON (exit status as without it)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError{"doctor: usage: clusterapp doctor [--json]"}
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
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Findings []doctor.Finding `json:"findings"`
			Problems int              `json:"problems"`
		}{findings, doctor.Problems(findings)}); err != nil {
			return err
		}
		if n := doctor.Problems(findings); n > 0 {
			return fmt.Errorf("doctor: %d problem(s) found", n)
		}
		return nil
	}
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
