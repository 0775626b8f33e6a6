package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/clusterapp/clusterapp/service/config"
)

// runConfig prints or checks the configuration.
func runConfig(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	check := fs.String("check", "", "validate this environment `file`")
	template := fs.Bool("env-template", false, "print the commented environment file")
	markdown := fs.Bool("markdown", false, "print a markdown table of the variables")
	if err := fs.Parse(args); err != nil {
		return usageError{fmt.Sprintf("config: %v", err)}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("config: unexpected argument %q", fs.Arg(0))}
	}
	switch {
	case *check != "":
		return checkFile(*check, stdout)
	case *template:
		return config.WriteEnvTemplate(stdout)
	case *markdown:
		return config.WriteMarkdown(stdout)
	}
	return printConfig(stdout)
}

// printConfig shows every variable with its default and effective value;
// an invalid environment is reported after the table.
func printConfig(stdout io.Writer) error {
	c, err := config.Load()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tEFFECTIVE\tDESCRIPTION")
	for _, v := range config.Vars() {
		eff := c.Value(v)
		if raw, set := os.LookupEnv(v.Key); set {
			eff = raw + " (set)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Key, orDash(v.Default), orDash(eff), v.Description)
	}
	if ferr := tw.Flush(); ferr != nil {
		return ferr
	}
	if unknown := config.Unknown(environKeys()); len(unknown) > 0 {
		fmt.Fprintln(stdout, "\nwarning: "+strings.Join(unknown, "; "))
	}
	if err != nil {
		return configError{err}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func environKeys() []string {
	var keys []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	return keys
}

// checkFile validates an environment file as the worker would read it.
func checkFile(path string, stdout io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer f.Close()
	vars, err := config.ParseEnvFile(f)
	if err != nil {
		return configError{fmt.Errorf("%s: %w", path, err)}
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var problems []string
	problems = append(problems, config.Unknown(keys)...)
	if _, err := config.LoadVars(vars); err != nil {
		var ce *config.Error
		if !errors.As(err, &ce) {
			return fmt.Errorf("check %s: %w", path, err)
		}
		for _, p := range ce.Problems {
			problems = append(problems, p.String())
		}
	}
	if len(problems) > 0 {
		return configError{fmt.Errorf("%s: %s", path, strings.Join(problems, "; "))}
	}
	_, err = fmt.Fprintf(stdout, "%s: ok (%d variables set)\n", path, len(keys))
	return err
}
