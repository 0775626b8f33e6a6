package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// operatorDocs are the documents an operator follows, relative to the
// repository: every command they show must be one the binary has.
var operatorDocs = []string{"README.md", "docs/operations.md", "docs/own-handler.md", "docs/benchmarks.md", "packaging/README.md"}

// codeOf returns the code of a Markdown document, one entry per line of a
// fenced block and one per inline code span: where commands are written to
// be typed. Prose that merely names the program ("clusterapp is ...") is
// left out.
func codeOf(doc string) []string {
	var code []string
	fenced := false
	span := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			code = append(code, line)
			continue
		}
		for _, m := range span.FindAllStringSubmatch(line, -1) {
			code = append(code, m[1])
		}
	}
	return code
}

// invocation is `clusterapp WORDS` where a command starts: at the start of
// the code (after a prompt, sudo or a path such as bin/), or after a pipe,
// a shell operator or `$(`. Sample output in a block ("Started ... -
// clusterapp worker 3.") is not a command.
var invocation = regexp.MustCompile(`(?:^\s*(?:\$\s+)?(?:sudo\s+)?|[|;&(]\s*(?:sudo\s+)?)(?:[\w./-]*/)?clusterapp((?:[ \t]+[^\s|;&#)]+)*)`)

// TestDocsNameCommandsThatExist fails when a document shows a command or a
// flag the binary does not have: `clusterapp rollout` and `clusterapp
// watch` stood in docs/operations.md and docs/own-handler.md after the
// commands became reload and status --watch.
func TestDocsNameCommandsThatExist(t *testing.T) {
	root := newRootCommand(io.Discard, io.Discard)
	checked := 0
	for _, name := range operatorDocs {
		b, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, code := range codeOf(string(b)) {
			for _, m := range invocation.FindAllStringSubmatchIndex(code, -1) {
				words := strings.Fields(code[m[2]:m[3]])
				if problem := checkInvocation(root, words); problem != "" {
					t.Errorf("%s: `%s`: %s", name, strings.TrimSpace(code), problem)
				}
				checked++
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d invocations of clusterapp found in %v: the scan is broken", checked, operatorDocs)
	}
}

// checkInvocation says what is wrong with `clusterapp WORDS...`: a command
// the binary lacks, or a flag its command does not take; "" when nothing.
// Words that are not flags after the command are its arguments.
func checkInvocation(root *cobra.Command, words []string) string {
	cmd := root
	if len(words) > 0 && !strings.HasPrefix(words[0], "-") {
		sub, _, err := root.Find(words[:1])
		if err != nil || sub == root {
			if !regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(words[0]) {
				return "" // not a command: a file name, a placeholder such as <cmd>, prose in a span
			}
			return "no command " + words[0]
		}
		cmd, words = sub, words[1:]
	}
	for _, w := range words {
		if !strings.HasPrefix(w, "-") || w == "-" || w == "--" {
			continue
		}
		flag := strings.SplitN(strings.TrimLeft(w, "-"), "=", 2)[0]
		if !regexp.MustCompile(`^[a-zA-Z][a-z-]*$`).MatchString(flag) {
			continue // -10m as --since's value, and the like
		}
		known := cmd.Flags().Lookup(flag) != nil || cmd.InheritedFlags().Lookup(flag) != nil ||
			(flag == "help" || flag == "h") || (cmd == root && (flag == "version" || flag == "v"))
		if !strings.HasPrefix(w, "--") && len(flag) == 1 {
			known = cmd.Flags().ShorthandLookup(flag) != nil || cmd.InheritedFlags().ShorthandLookup(flag) != nil || flag == "h" || (cmd == root && flag == "v")
		}
		if !known && !strings.Contains(flag, "bogus") { // a wrong flag shown with its error on purpose
			return cmd.Name() + " has no flag " + w
		}
	}
	return ""
}
