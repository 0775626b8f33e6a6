// Package unitfile writes systemd unit files and drop-ins, escaping every
// value by systemd's rules. It is the one way the generator writes what an
// operator put in the environment file into a unit, because a unit file is
// code that systemd runs as root: in systemd 252 a carriage return ends a
// line there, so an unescaped value can add a directive (an ExecStartPre=
// that runs as root was demonstrated with CLUSTERAPP_LISTEN).
//
// The rules (systemd.syntax(7), systemd.unit(5) "Specifiers", and
// config_parse_environ for Environment=):
//
//   - a value is one line: CR, LF and every other control character are
//     refused, never passed through;
//   - leading and trailing whitespace would be trimmed by systemd, and a
//     trailing backslash would join the next line: both are refused;
//   - '%' starts a specifier (%i, %H, ...) in the directives that resolve
//     specifiers, where it is written as "%%"; others (MemoryMax=, the
//     time spans, the limits) take '%' literally, as in MemoryMax=50%,
//     and doubling it there is an invalid value (verify says so);
//   - Environment= splits its value into words with shell-like quoting and
//     C escapes: an assignment is written as one double-quoted word with '\'
//     and '"' escaped;
//   - comments are single lines, with control characters escaped.
//
// Tests check the output with `systemd-analyze verify` and with an
// injection corpus (service/config/generator) and under the real systemd
// (systemd/injection_test.go).
package unitfile

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// File is a unit file or drop-in being written.
type File struct {
	b   strings.Builder
	err error
}

// New starts a file with a comment header (may be empty).
func New(header string) *File {
	f := &File{}
	if header == "" {
		return f
	}
	for _, line := range strings.Split(strings.TrimSuffix(header, "\n"), "\n") {
		f.Comment(line)
	}
	return f
}

// Section starts [name].
func (f *File) Section(name string) *File {
	fmt.Fprintf(&f.b, "[%s]\n", name)
	return f
}

// Comment writes one comment line; control characters are escaped.
func (f *File) Comment(text string) *File {
	q := strconv.Quote(text)
	q = strings.TrimRight(q[1:len(q)-1], " ") // escaped, without the surrounding quotes
	if strings.HasSuffix(q, `\`) {
		q += " #" // a line ending in a backslash would join the next one
	}
	f.b.WriteString("# " + q + "\n")
	return f
}

// literal lists directives whose values systemd 252 takes without
// resolving specifiers (their parsers in load-fragment.c never call
// unit_full_printf): '%' is written as it is.
var literal = map[string]bool{
	"MemoryHigh": true, "MemoryMax": true, "MemoryLow": true, "MemoryMin": true, "MemorySwapMax": true,
	"WatchdogSec": true, "TimeoutStopSec": true, "TimeoutStartSec": true, "RestartSec": true,
	"LimitNOFILE": true, "Backlog": true, "CPUQuota": true,
}

// Set writes key=value, with '%' escaped where key resolves specifiers. A
// value that a unit file cannot hold as it is (see the package comment) is
// an error, kept until String. An empty value writes "key=", which resets a
// list setting.
func (f *File) Set(key, value string) *File {
	if err := checkValue(value); err != nil {
		f.fail(fmt.Errorf("%s=%q: %w", key, value, err))
		return f
	}
	if !literal[key] {
		value = strings.ReplaceAll(value, "%", "%%")
	}
	f.b.WriteString(key + "=" + value + "\n")
	return f
}

// SetEnv writes Environment="NAME=value", quoted as one word.
func (f *File) SetEnv(name, value string) *File {
	if err := checkValue(value); err != nil {
		f.fail(fmt.Errorf("Environment=%s=%q: %w", name, value, err))
		return f
	}
	word := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%").Replace(name + "=" + value)
	f.b.WriteString(`Environment="` + word + "\"\n")
	return f
}

// UnsetEnv writes UnsetEnvironment="NAME=value", quoted as SetEnv quotes:
// systemd then removes NAME from the environment only while it holds value,
// so a value corrected in the environment file passes even before the
// drop-in is written again. A value a unit file cannot hold as it is (see
// checkValue) removes NAME whatever it holds.
func (f *File) UnsetEnv(name, value string) *File {
	word := name
	if checkValue(value) == nil {
		word += "=" + value
	}
	word = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%").Replace(word)
	f.b.WriteString(`UnsetEnvironment="` + word + "\"\n")
	return f
}

func (f *File) fail(err error) {
	if f.err == nil {
		f.err = err
	}
}

// String returns the file, or the first value it could not write.
func (f *File) String() (string, error) {
	if f.err != nil {
		return "", fmt.Errorf("unit file: %w", f.err)
	}
	return f.b.String(), nil
}

func checkValue(v string) error {
	for i, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("control character %q at byte %d: a unit file value is one line", r, i)
		}
	}
	switch {
	case strings.TrimSpace(v) != v:
		return fmt.Errorf("leading or trailing whitespace, which systemd trims")
	case strings.HasSuffix(v, `\`):
		return fmt.Errorf("a trailing backslash, which joins the next line")
	}
	return nil
}
