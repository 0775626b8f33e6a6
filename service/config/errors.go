package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kelseyhightower/envconfig"
)

// Problem is one invalid variable: its name, the value given, and a phrase
// saying what is expected instead.
type Problem struct {
	Key      string
	Value    string
	Expected string
	// Scope is the variable's, which decides what the problem means.
	Scope Scope
}

func (p Problem) String() string {
	return fmt.Sprintf("%s=%q is invalid: expected %s", p.Key, p.Value, p.Expected)
}

// Error lists every invalid variable found by Load or LoadVars.
type Error struct {
	Problems []Problem
}

// Only returns the problems whose scope is one of scopes, as an *Error, or
// nil when there are none.
func (e *Error) Only(scopes ...Scope) *Error {
	var ps []Problem
	for _, p := range e.Problems {
		if slices.Contains(scopes, p.Scope) {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return &Error{Problems: ps}
}

// Error joins the problems on one line, so a refused start is one journal line.
func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "invalid configuration: " + strings.Join(parts, "; ")
}

// expectations says, per Go type, what a valid value looks like.
var expectations = map[string]string{
	"int":           "a whole number",
	"float64":       "a number",
	"bool":          boolExpected, // not reached: load reads booleans itself (boolValue)
	"string":        "a string",
	"time.Duration": "a duration such as 500ms, 30s or 1m30s",
}

func parseProblem(pe *envconfig.ParseError) Problem {
	var vd validationDetail
	if errors.As(pe.Err, &vd) {
		return Problem{Key: pe.KeyName, Value: pe.Value, Expected: vd.expected}
	}
	expected, ok := expectations[pe.TypeName]
	if !ok {
		expected = "a value of type " + pe.TypeName
	}
	return Problem{Key: pe.KeyName, Value: pe.Value, Expected: expected}
}

// validationDetail is returned by the Decode methods of the custom types so
// the problem carries their own description of a valid value.
type validationDetail struct{ expected string }

func (v validationDetail) Error() string { return "expected " + v.expected }
