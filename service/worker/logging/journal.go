package logging

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/sirupsen/logrus"
)

// Identifier is every entry's SYSLOG_IDENTIFIER= (`journalctl -t clusterapp`),
// the name journald gives the worker's stderr lines too.
const Identifier = "clusterapp"

// fieldNameMax is journald's limit on a field name's length: a longer name
// makes it drop the field.
const fieldNameMax = 64

// journalEnv is what the logger needs of the journal, apart so tests can
// send without journald.
type journalEnv struct {
	enabled func() bool // the socket answers
	send    func(message string, priority journal.Priority, vars map[string]string) error
}

var stdJournal = journalEnv{enabled: journal.Enabled, send: journal.Send}

// nativeFormatter sends each entry to the journal and returns nothing for
// logrus to write, or the stderr line when the send fails.
type nativeFormatter struct {
	message logrus.Formatter // MESSAGE=: the line without its priority prefix
	line    logrus.Formatter // the stderr line for a failed send
	send    func(message string, priority journal.Priority, vars map[string]string) error
	failing atomic.Bool // the last send failed; the first failure of a run is explained once
}

func (n *nativeFormatter) Format(e *logrus.Entry) ([]byte, error) {
	msg, err := n.message.Format(withoutMessageID(e))
	if err != nil {
		return nil, err
	}
	sendErr := n.send(strings.TrimSuffix(string(msg), "\n"), priority(e.Level), journalFields(e.Data))
	if sendErr == nil {
		n.failing.Store(false)
		return nil, nil
	}
	line, err := n.line.Format(e)
	if err != nil {
		return nil, err
	}
	if n.failing.Swap(true) {
		return line, nil
	}
	note := fmt.Sprintf("<%d>%s: cannot send to the journal natively, writing lines to stderr without their journal fields until it works again: %v\n", journal.PriWarning, Identifier, sendErr)
	return append([]byte(note), line...), nil
}

// withoutMessageID is e for MESSAGE=: its MESSAGE_ID= is a field of its own,
// and the text reads as it did before the field existed. The copy has no
// Buffer, which logrus formatters append to: e's is for the stderr line.
func withoutMessageID(e *logrus.Entry) *logrus.Entry {
	c := *e
	c.Buffer = nil
	if _, ok := e.Data[MessageIDKey]; ok {
		c.Data = make(logrus.Fields, len(e.Data))
		for k, v := range e.Data {
			if k != MessageIDKey {
				c.Data[k] = v
			}
		}
	}
	return &c
}

// journalFields returns the journal fields of an entry: SYSLOG_IDENTIFIER=
// and each logrus field under FieldName(key). When two keys share a name,
// the first in sorted order keeps it (both stay in MESSAGE=).
func journalFields(data logrus.Fields) map[string]string {
	vars := map[string]string{"SYSLOG_IDENTIFIER": Identifier}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := FieldName(k)
		if _, taken := vars[name]; !taken {
			vars[name] = fmt.Sprint(data[k])
		}
	}
	return vars
}

// FieldName is the journal field name of logrus field key: upper-cased,
// every character outside [A-Z0-9_] replaced by '_', at most 64 long.
// A name journald would refuse or that would collide with a field the
// logger sets itself is prefixed with "FIELD_": one starting with '_'
// (journald reserves those for trusted fields) or a digit, and MESSAGE,
// PRIORITY and SYSLOG_IDENTIFIER. So worker is WORKER, error is ERROR,
// message_id is MESSAGE_ID, "2xx" is FIELD_2XX.
func FieldName(key string) string {
	var b strings.Builder
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	switch {
	case name == "", name[0] == '_', name[0] >= '0' && name[0] <= '9',
		name == "MESSAGE", name == "PRIORITY", name == "SYSLOG_IDENTIFIER":
		name = "FIELD_" + name
	}
	if len(name) > fieldNameMax {
		name = name[:fieldNameMax]
	}
	return name
}

// skipEmpty drops the empty writes logrus makes for entries sent natively.
type skipEmpty struct{ io.Writer }

func (s skipEmpty) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return s.Writer.Write(p)
}
