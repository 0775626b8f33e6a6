package envfile

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// bareSafe are the bytes a value may hold unquoted and still read back
// unchanged: no whitespace, quotes, backslashes or comment characters.
func bareSafe(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.:/%+,@=-[]", c) >= 0
}

// Quote returns value written so that Parse reads it back unchanged: bare
// when it is made of plain characters, otherwise in double quotes with ",
// \, ` and $ escaped (newlines and other characters are kept as they are
// inside double quotes). It fails for what no environment file can hold: a
// NUL byte or invalid UTF-8.
func Quote(value string) (string, error) {
	if strings.IndexByte(value, 0) >= 0 {
		return "", fmt.Errorf("a value with a NUL byte cannot be written to an environment file")
	}
	if !utf8.ValidString(value) {
		return "", fmt.Errorf("a value with invalid UTF-8 cannot be written to an environment file (systemd refuses such files)")
	}
	bare := true
	for i := 0; i < len(value); i++ {
		bare = bare && bareSafe(value[i])
	}
	if bare {
		return value, nil
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(value); i++ {
		if strings.IndexByte(shellNeedEscape, value[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(value[i])
	}
	b.WriteByte('"')
	return b.String(), nil
}

// Line returns the assignment KEY=value as Quote writes it, without a line
// break. The key must be a valid variable name.
func Line(key, value string) (string, error) {
	if !validName(key) {
		return "", fmt.Errorf("%q is not a valid variable name (letters, digits and _, not starting with a digit)", key)
	}
	q, err := Quote(value)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	return key + "=" + q, nil
}
