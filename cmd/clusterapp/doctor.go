package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/ops/doctor"
	"github.com/spf13/cobra"
)

// newDoctorCommand is doctor's command line.
func newDoctorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that the configuration is in effect; exit 1 with fixes when not",
		Long: `Check that the configuration is in effect: sysctls, limits, the socket, the workers
(running, and making progress: none stopped by a signal or without a watchdog ping for
half of WatchdogSec), the hardening of the units, and listening ports inside the
ephemeral port range.
Each finding is ok, warning or problem; a problem comes with its fix and makes
doctor exit 1. Needs root.`,
		Example: `  clusterapp doctor
  clusterapp doctor --json | jq '.findings[] | select(.severity != "ok")'`,
		Args: noArgs,
	}
	asJSON := cmd.Flags().Bool("json", false, "print the findings as JSON (exit status as without it)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runDoctor(cmd.Context(), *asJSON, cmd.OutOrStdout())
	}
	return cmd
}

// runDoctor checks that the configuration is in effect; it fails (exit 1)
// when a check finds a problem.
func runDoctor(ctx context.Context, asJSON bool, stdout io.Writer) error {
	c, err := dialUnits(ctx, "doctor")
	if err != nil {
		return err
	}
	defer c.Close()
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	facts, err := doctor.Gather(qctx, c, config.EnvFile)
	if err != nil {
		return fmt.Errorf("doctor: %w", err)
	}
	findings := doctor.Evaluate(facts)
	if asJSON {
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
