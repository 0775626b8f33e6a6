// Package envedit changes one variable of an environment file in place,
// the way an operator would with an editor: every other line (comments,
// blank lines, other variables, their order) is kept byte for byte.
//
// The file is systemd's EnvironmentFile= format (see config.ParseEnvFile),
// where the last assignment of a key wins; Set therefore rewrites the last
// active assignment. When the key is not assigned, the new line goes right
// after a commented-out template line ("#KEY=..." as `clusterapp config
// --env-template` writes them) or, failing that, at the end. The file is
// replaced atomically (a temporary file in the same directory, renamed over
// it), so a generator or a worker never reads half of it.
package envedit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// valuePattern is what Set writes unquoted; anything else is refused rather
// than quoted, since the only caller writes numbers.
var valuePattern = regexp.MustCompile(`^[A-Za-z0-9_.:/%+-]*$`)

// Set returns text with key assigned value. It fails when the last active
// assignment of key continues over several lines (a trailing backslash),
// which it will not guess how to rewrite.
func Set(text, key, value string) (string, error) {
	if !valuePattern.MatchString(value) {
		return "", fmt.Errorf("set %s: value %q needs quoting", key, value)
	}
	lines := strings.SplitAfter(text, "\n")
	assign := key + "=" + value
	active, template := -1, -1
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case assigns(trimmed, key):
			active = i
		case strings.HasPrefix(trimmed, "#") && assigns(strings.TrimSpace(strings.TrimLeft(trimmed, "#")), key):
			template = i
		}
	}
	switch {
	case active >= 0:
		if strings.HasSuffix(strings.TrimRight(lines[active], "\n"), `\`) {
			return "", fmt.Errorf("set %s: line %d continues on the next line; edit it by hand", key, active+1)
		}
		lines[active] = assign + newline(lines[active])
	case template >= 0:
		lines[template] = strings.TrimSuffix(lines[template], "\n") + "\n" + assign + "\n"
	default:
		if len(text) > 0 && !strings.HasSuffix(text, "\n") {
			lines[len(lines)-1] += "\n"
		}
		lines = append(lines, assign+"\n")
	}
	return strings.Join(lines, ""), nil
}

// assigns reports whether a trimmed line assigns key ("KEY=" or "KEY =").
func assigns(trimmed, key string) bool {
	k, _, ok := strings.Cut(trimmed, "=")
	return ok && strings.TrimSpace(k) == key
}

func newline(line string) string {
	if strings.HasSuffix(line, "\n") {
		return "\n"
	}
	return ""
}

// SetFile applies Set to the file at path, creating it (mode 0644, and its
// directory) when absent. An existing file keeps its mode.
func SetFile(path, key, value string) error {
	old, err := os.ReadFile(path)
	mode := fs.FileMode(0o644)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
		}
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	default:
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
	}
	text, err := Set(string(old), key, value)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if bytes.Equal(old, []byte(text)) {
		return nil
	}
	return replace(path, []byte(text), mode)
}

// replace writes data to a temporary file beside path and renames it over.
func replace(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
