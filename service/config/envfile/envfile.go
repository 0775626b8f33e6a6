// Package envfile reads and writes environment files exactly as systemd's
// EnvironmentFile= does, so every clusterapp command that reads
// /etc/clusterapp/clusterapp.env (the generator, `config --check`, `config`,
// `doctor`, `scale`) sees the same variables as the workers systemd starts.
//
// A parser that is merely close to systemd's is a trap: when the two
// disagree, the generator writes units from one reading of the file while
// the workers run with another (an `export X=1` line used to make the
// generator drop the whole file and move the socket to all addresses while
// the workers, reading it through systemd, ran on). Parse is therefore a
// transcription of the state machine in systemd's src/basic/env-file.c
// (parse_env_file_internal, v252) and of what load_env_file and
// strv_env_clean do with its output, checked against the real systemd by a
// differential test (systemd/envfile_diff_test.go):
//
//   - the whole file is read first; a NUL byte anywhere makes systemd refuse
//     the file (EBADMSG), and so does invalid UTF-8 in any key or value;
//     with EnvironmentFile=-PATH a refused file is skipped as a whole;
//   - '#' or ';' where a key would start begins a comment, which runs to the
//     end of the line; a backslash in a comment escapes the next character,
//     so a comment ending in a backslash also swallows the next line;
//   - a key runs to '=' (surrounding whitespace trimmed); a line that ends
//     before any '=' is skipped; a key that is not a valid name (letters,
//     digits and '_', not starting with a digit; so `export KEY` or a
//     byte-order mark glued to the first key) is dropped after parsing;
//   - an unquoted value runs to the end of the line with trailing whitespace
//     trimmed, a backslash keeps the next character literally (dropping the
//     backslash) and a backslash before a newline continues the value on the
//     next line; quotes inside an unquoted value are literal;
//   - where a value starts (and again right after a closing quote), '...'
//     takes everything literally up to the next quote, newlines included;
//     "..." does the same but \" \\ \` \$ are escapes, a backslash before a
//     newline is a continuation and a backslash before anything else stays;
//     a quote left open swallows the rest of the file;
//   - '\r' ends a line like '\n', so CRLF files read as expected;
//   - the last assignment of a key wins.
//
// Lines systemd skips are reported in File.Warnings with the reason, never as
// an error: they are warnings for the operator, as they are for systemd.
package envfile

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxBytes is the largest file systemd reads (READ_FULL_BYTES_MAX in v252:
// 64 MiB - 1); a larger one is refused as a whole.
const MaxBytes = 64<<20 - 1

// Assignment is one KEY=value systemd applies.
type Assignment struct {
	Key   string
	Value string
	// Line is the 1-based line on which the key starts.
	Line int
	// Start and End are the byte offsets of the assignment in the file:
	// from the key's first character to the end of its value (continuation
	// lines included), before the line break that ends it.
	Start, End int
}

// Warning is a line systemd skips, or reads other than it looks.
type Warning struct {
	Line   int
	Text   string // the text concerned, at most 80 bytes of it
	Reason string
}

func (w Warning) String() string {
	return fmt.Sprintf("line %d: %s: %q", w.Line, w.Reason, w.Text)
}

// File is what systemd takes from an environment file.
type File struct {
	// Assignments in file order, a key possibly more than once (the last
	// one wins).
	Assignments []Assignment
	// Warnings about lines systemd skips or reads surprisingly, in file
	// order.
	Warnings []Warning
}

// Vars returns the variables systemd sets: the last assignment of each key.
func (f *File) Vars() map[string]string {
	vars := make(map[string]string, len(f.Assignments))
	for _, a := range f.Assignments {
		vars[a.Key] = a.Value
	}
	return vars
}

// Last returns the assignment of key that takes effect, if any.
func (f *File) Last(key string) (Assignment, bool) {
	for i := len(f.Assignments) - 1; i >= 0; i-- {
		if f.Assignments[i].Key == key {
			return f.Assignments[i], true
		}
	}
	return Assignment{}, false
}

// ErrRefused marks a file systemd refuses to load as a whole.
var ErrRefused = errors.New("envfile: systemd refuses this file as a whole")

// RefusedError says why systemd would not load the file at all.
type RefusedError struct {
	Line   int
	Reason string
}

func (e *RefusedError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s: systemd ignores the whole file (EnvironmentFile=-) or fails the unit", e.Line, e.Reason)
	}
	return e.Reason + ": systemd ignores the whole file (EnvironmentFile=-) or fails the unit"
}

// Is makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Parse reads data as systemd's EnvironmentFile= does. The error, when not
// nil, is a *RefusedError: systemd loads nothing from such a file.
func Parse(data []byte) (*File, error) {
	if len(data) > MaxBytes {
		return nil, &RefusedError{Reason: fmt.Sprintf("the file has %d bytes, more than systemd reads (%d)", len(data), MaxBytes)}
	}
	if i := strings.IndexByte(string(data), 0); i >= 0 {
		return nil, &RefusedError{Line: lineAt(data, i), Reason: "a NUL byte"}
	}
	p := &parser{data: data, file: &File{}}
	p.run()
	if p.refused != nil {
		return nil, p.refused
	}
	return p.file, nil
}

func lineAt(data []byte, off int) int {
	return strings.Count(string(data[:off]), "\n") + 1
}

// validName is systemd's env_name_is_valid: letters, digits and '_', not
// starting with a digit.
func validName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// push is systemd's load_env_file_push followed by strv_env_clean: invalid
// UTF-8 refuses the file, an invalid name drops the assignment.
func (p *parser) push(key string, value []byte, end int) {
	if p.refused != nil {
		return
	}
	line := p.keyLine
	if !utf8.ValidString(key) {
		p.refused = &RefusedError{Line: line, Reason: "invalid UTF-8 in a variable name"}
		return
	}
	if !utf8.Valid(value) {
		p.refused = &RefusedError{Line: line, Reason: "invalid UTF-8 in the value of " + key}
		return
	}
	if !validName(key) {
		p.warn(p.keyStart, end, invalidNameReason(key))
		return
	}
	p.file.Assignments = append(p.file.Assignments, Assignment{Key: key, Value: string(value), Line: line, Start: p.keyStart, End: end})
}

func invalidNameReason(key string) string {
	switch {
	case strings.HasPrefix(key, "\ufeff"):
		return "systemd skips this line: the file starts with a byte-order mark, which systemd reads as part of the first name"
	case strings.HasPrefix(key, "export ") || strings.HasPrefix(key, "export\t"):
		return "systemd skips this line: `export` is shell syntax, and `" + key + "` is not a valid variable name"
	}
	return fmt.Sprintf("systemd skips this line: %q is not a valid variable name (letters, digits and _, not starting with a digit)", key)
}

// warn records a warning about the key that starts at start.
func (p *parser) warn(start, end int, reason string) {
	text := string(p.data[start:end])
	if len(text) > 80 {
		text = text[:80]
	}
	p.file.Warnings = append(p.file.Warnings, Warning{Line: p.keyLine, Text: text, Reason: reason})
}
