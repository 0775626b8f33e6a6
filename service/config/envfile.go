package config

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

var keyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseEnvFile reads an environment file in the format systemd's
// EnvironmentFile= accepts: one KEY=value per line; blank lines and lines
// starting with # or ; are ignored; a value may be wrapped in single quotes
// (taken literally) or double quotes (where \" \\ \$ and \` are escapes); a
// backslash at the end of a line continues it on the next. Later assignments
// of the same key win, as in systemd. Errors name the line.
func ParseEnvFile(r io.Reader) (map[string]string, error) {
	vars := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	lineNo, pending, start := 0, "", 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if pending == "" {
			start = lineNo
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			pending += strings.TrimSuffix(line, `\`)
			continue
		}
		line, pending = pending+line, ""
		if err := parseEnvLine(line, vars); err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read environment file: %w", err)
	}
	if pending != "" {
		if err := parseEnvLine(pending, vars); err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
	}
	return vars, nil
}

func parseEnvLine(line string, vars map[string]string) error {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' || line[0] == ';' {
		return nil
	}
	key, value, ok := strings.Cut(line, "=")
	if !ok {
		return fmt.Errorf("%q is not KEY=value", line)
	}
	key = strings.TrimSpace(key)
	if !keyPattern.MatchString(key) {
		return fmt.Errorf("%q is not a valid variable name (letters, digits and _, not starting with a digit)", key)
	}
	v, err := unquote(strings.TrimSpace(value))
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	vars[key] = v
	return nil
}

func unquote(v string) (string, error) {
	if v == "" || (v[0] != '"' && v[0] != '\'') {
		return v, nil
	}
	q := v[0]
	if len(v) < 2 || v[len(v)-1] != q {
		return "", fmt.Errorf("value %s has no closing %c", v, q)
	}
	body := v[1 : len(v)-1]
	if q == '\'' {
		return body, nil
	}
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		if body[i] == '\\' && i+1 < len(body) && strings.IndexByte("\"\\$`", body[i+1]) >= 0 {
			i++
		}
		b.WriteByte(body[i])
	}
	return b.String(), nil
}

// Unknown returns the CLUSTERAPP_* names in keys that are not part of the
// specification, each with a suggestion when a known name is close (a typo
// such as CLUSTERAPP_WORKER for CLUSTERAPP_WORKERS would otherwise be
// silently ignored).
func Unknown(keys []string) []string {
	var out []string
	for _, k := range keys {
		if !strings.HasPrefix(k, Prefix+"_") || known(k) {
			continue
		}
		msg := "unknown variable " + k
		if s := closest(k); s != "" {
			msg += " (did you mean " + s + "?)"
		}
		out = append(out, msg)
	}
	return out
}

func known(key string) bool {
	for _, v := range Vars() {
		if v.Key == key {
			return true
		}
	}
	return false
}

func closest(key string) string {
	best, bestDist := "", 4
	for _, v := range Vars() {
		if d := editDistance(key, v.Key); d < bestDist {
			best, bestDist = v.Key, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
