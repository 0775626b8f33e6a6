package envfile

import "strings"

// The character classes of systemd's env-file.c.
const (
	comments        = "#;"
	whitespace      = " \t\n\r"
	newlines        = "\n\r"
	shellNeedEscape = "\"\\`$"
)

type state int

// The states of parse_env_file_internal, under the same names.
const (
	preKey state = iota
	inKey
	preValue
	inValue
	valueEscape
	singleQuoteValue
	doubleQuoteValue
	doubleQuoteValueEscape
	inComment
	commentEscape
)

type parser struct {
	data    []byte
	file    *File
	refused *RefusedError

	state    state
	key      []byte
	value    []byte
	keyStart int // offset of the key's first byte
	line     int // 1-based line of the byte being read
	keyLine  int // line of keyStart
	// lastKeyWS and lastValueWS are where trailing whitespace of the key or
	// value begins (-1: none), as last_key_whitespace and
	// last_value_whitespace in systemd.
	lastKeyWS, lastValueWS int
	quoteLine              int // where the quote still open at EOF began
}

func in(set string, c byte) bool { return strings.IndexByte(set, c) >= 0 }

// run is parse_env_file_internal's loop over every byte of the file.
func (p *parser) run() {
	p.line = 1
	for i, c := range p.data {
		p.step(i, c)
		if c == '\n' {
			p.line++
		}
	}
	p.finish()
}

// step handles byte c at offset i: one case per state, as in systemd.
func (p *parser) step(i int, c byte) {
	switch p.state {
	case preKey:
		p.preKey(i, c)
	case inKey:
		p.inKey(i, c)
	case preValue:
		p.preValue(i, c)
	case inValue:
		p.inValue(i, c)
	case valueEscape:
		p.state = inValue
		if !in(newlines, c) { // an escaped newline is eaten: a continuation
			p.value = append(p.value, c)
		}
	case singleQuoteValue:
		if c == '\'' {
			p.state = preValue
		} else {
			p.value = append(p.value, c)
		}
	case doubleQuoteValue:
		switch c {
		case '"':
			p.state = preValue
		case '\\':
			p.state = doubleQuoteValueEscape
		default:
			p.value = append(p.value, c)
		}
	case doubleQuoteValueEscape:
		p.state = doubleQuoteValue
		switch {
		case in(shellNeedEscape, c):
			p.value = append(p.value, c)
		case c != '\n': // like the shell, keep the backslash
			p.value = append(p.value, '\\', c)
		} // an escaped '\n' is a continuation, eaten
	case inComment:
		if c == '\\' {
			p.state = commentEscape
		} else if in(newlines, c) {
			p.state = preKey
		}
	case commentEscape:
		p.state = inComment
	}
}

func (p *parser) preKey(i int, c byte) {
	switch {
	case in(comments, c):
		p.state = inComment
	case !in(whitespace, c):
		p.state = inKey
		p.key, p.value = append(p.key[:0], c), nil
		p.keyStart, p.keyLine, p.lastKeyWS = i, p.line, -1
	}
}

func (p *parser) inKey(i int, c byte) {
	switch {
	case in(newlines, c):
		p.state = preKey
		p.warn(p.keyStart, i, "systemd skips this line: it has no '=' (not KEY=value)")
	case c == '=':
		p.state = preValue
		p.lastValueWS = -1
	default:
		if !in(whitespace, c) {
			p.lastKeyWS = -1
		} else if p.lastKeyWS < 0 {
			p.lastKeyWS = len(p.key)
		}
		p.key = append(p.key, c)
	}
}

func (p *parser) preValue(i int, c byte) {
	switch {
	case in(newlines, c):
		p.state = preKey
		p.emit(i, false)
	case c == '\'':
		p.state = singleQuoteValue
		p.quoteLine = p.line
	case c == '"':
		p.state = doubleQuoteValue
		p.quoteLine = p.line
	case c == '\\':
		p.state = valueEscape
	case !in(whitespace, c):
		p.state = inValue
		p.value = append(p.value, c)
	}
}

func (p *parser) inValue(i int, c byte) {
	switch {
	case in(newlines, c):
		p.state = preKey
		p.emit(i, true)
	case c == '\\':
		p.state = valueEscape
		p.lastValueWS = -1
	default:
		if !in(whitespace, c) {
			p.lastValueWS = -1
		} else if p.lastValueWS < 0 {
			p.lastValueWS = len(p.value)
		}
		p.value = append(p.value, c)
	}
}

// emit pushes the current key and value, ending at offset end; trim chomps
// the value's trailing whitespace (systemd does so for unquoted values only).
func (p *parser) emit(end int, trim bool) {
	value := p.value
	if trim && p.lastValueWS >= 0 {
		value = value[:p.lastValueWS]
	}
	key := p.key
	if p.lastKeyWS >= 0 {
		key = key[:p.lastKeyWS]
	}
	p.push(string(key), value, end)
	p.key, p.value = p.key[:0], nil
}

// finish handles the end of the file like systemd: a pending assignment is
// pushed, even inside an open quote; a key without '=' is dropped.
func (p *parser) finish() {
	end := len(p.data)
	switch p.state {
	case inKey:
		p.warn(p.keyStart, end, "systemd skips this line: it has no '=' (not KEY=value)")
	case singleQuoteValue, doubleQuoteValue, doubleQuoteValueEscape:
		key := string(p.key)
		if p.lastKeyWS >= 0 {
			key = key[:p.lastKeyWS]
		}
		p.file.Warnings = append(p.file.Warnings, Warning{Line: p.quoteLine, Text: key,
			Reason: "a quote opened here is never closed: systemd reads the rest of the file into " + key})
		p.emit(end, false)
	case preValue, valueEscape:
		p.emit(end, false)
	case inValue:
		p.emit(end, true)
	}
}
