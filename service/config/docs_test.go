package config

import (
	"os"
	"strings"
	"testing"
)

// TestREADMETableIsCurrent fails when README.md's variable table differs from
// the code; `make docs` regenerates it.
func TestREADMETableIsCurrent(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- vars:begin -->\n")
	table, _, ok2 := strings.Cut(rest, "<!-- vars:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md lacks the <!-- vars:begin --> / <!-- vars:end --> markers")
	}
	var want strings.Builder
	if err := WriteMarkdown(&want); err != nil {
		t.Fatal(err)
	}
	if table != want.String() {
		t.Fatal("README.md's variable table is stale: run `make docs`")
	}
}

// TestOperationsInvalidTableIsCurrent fails when docs/operations.md's table
// of what invalid values do differs from the code; `make docs` regenerates it.
func TestOperationsInvalidTableIsCurrent(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- invalid:begin -->\n")
	table, _, ok2 := strings.Cut(rest, "<!-- invalid:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/operations.md lacks the <!-- invalid:begin --> / <!-- invalid:end --> markers")
	}
	var want strings.Builder
	if err := WriteInvalidMarkdown(&want); err != nil {
		t.Fatal(err)
	}
	if table != want.String() {
		t.Fatal("docs/operations.md's table of invalid values is stale: run `make docs`")
	}
}
