//go:build !mandocs

package main

import "github.com/spf13/cobra"

// docsCommands is empty in the shipped binary: the man page and completions
// are written by bin/clusterapp-docs, built from the same command
// definitions with -tags mandocs (docs.go says why).
func docsCommands() []*cobra.Command { return nil }
