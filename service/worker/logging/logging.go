// Package logging builds the worker's logrus logger.
//
// Under journald (JOURNAL_STREAM names stderr) each entry is sent with the
// journal's native protocol (go-systemd's journal package: a datagram to
// /run/systemd/journal/socket, no cgo) rather than written to stderr, so
// its fields are journal fields: `journalctl WORKER=2` and
// `journalctl MESSAGE_ID=...` select on them (see journal.go for how a
// logrus field is named there, events.go for the MESSAGE_ID= values).
// MESSAGE= is the line the text (or JSON) formatter prints, so
// `journalctl -u` reads as it would from stderr; PRIORITY= comes from the
// level, so `journalctl -p warning` works.
//
// Lines carry no timestamp and no colours under journald, which stamps each
// entry itself. When a native send fails (journald's socket is missing, or
// refuses the datagram), that entry is written to stderr instead, prefixed
// with its syslog priority such as "<4>": journald's SyslogLevelPrefix= (on
// by default) turns the prefix into the entry's PRIORITY. No line is lost
// either way; only the fields are.
package logging

import (
	"fmt"
	"io"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/sirupsen/logrus"
)

// Format names for Options.Format.
const (
	// FormatText is logrus's key=value text.
	FormatText = "text"
	// FormatJSON is one JSON object per line.
	FormatJSON = "json"
	// FormatPlain is the message alone after "clusterapp: ", as a
	// command-line tool writes it, for lines logged while the configuration
	// (so CLUSTERAPP_LOG_FORMAT) is invalid. Under journald the entry's
	// fields are still sent as journal fields; on stderr they are dropped.
	FormatPlain = "plain"
)

// Options for New.
type Options struct {
	Format  string       // FormatText (the default), FormatJSON or FormatPlain
	Level   logrus.Level // least severe level logged
	Journal bool         // stderr is connected to journald: send natively (see the package comment)
	Out     io.Writer    // usually os.Stderr
}

// New returns a logger for opts. With opts.Journal, entries go to the
// journal natively when its socket answers (journal.Enabled), and to
// opts.Out with a priority prefix when it does not or when a send fails.
func New(opts Options) *logrus.Logger {
	return newLogger(opts, stdJournal)
}

func newLogger(opts Options, j journalEnv) *logrus.Logger {
	l := logrus.New()
	l.SetOutput(opts.Out)
	l.SetLevel(opts.Level)
	var f logrus.Formatter = &logrus.TextFormatter{FullTimestamp: true}
	switch {
	case opts.Format == FormatPlain:
		f = plainFormatter{}
	case opts.Format == FormatJSON:
		f = &logrus.JSONFormatter{DisableTimestamp: opts.Journal}
	case opts.Journal:
		f = &logrus.TextFormatter{DisableTimestamp: true, DisableColors: true}
	}
	if !opts.Journal {
		l.SetFormatter(f)
		return l
	}
	line := priorityFormatter{f}
	if !j.enabled() {
		l.SetFormatter(line)
		return l
	}
	// The formatter sends the entry and returns nothing to write, or the
	// stderr line when the send failed: logrus has no other per-entry seam
	// that decides whether a line is written.
	l.SetFormatter(&nativeFormatter{message: f, line: line, send: j.send})
	l.SetOutput(skipEmpty{opts.Out})
	return l
}

// UnderJournal reports whether stderr is connected to journald.
func UnderJournal() bool {
	ok, err := journal.StderrIsJournalStream()
	return err == nil && ok
}

// priorityFormatter prefixes each line with its syslog priority.
type priorityFormatter struct{ logrus.Formatter }

func (p priorityFormatter) Format(e *logrus.Entry) ([]byte, error) {
	b, err := p.Formatter.Format(e)
	if err != nil {
		return nil, err
	}
	return append([]byte(fmt.Sprintf("<%d>", priority(e.Level))), b...), nil
}

// plainFormatter writes "clusterapp: " and the message (FormatPlain).
type plainFormatter struct{}

func (plainFormatter) Format(e *logrus.Entry) ([]byte, error) {
	return []byte(Identifier + ": " + e.Message + "\n"), nil
}

// priority maps logrus levels to syslog priorities (sd-daemon.h).
func priority(l logrus.Level) journal.Priority {
	switch l {
	case logrus.PanicLevel, logrus.FatalLevel:
		return journal.PriCrit
	case logrus.ErrorLevel:
		return journal.PriErr
	case logrus.WarnLevel:
		return journal.PriWarning
	case logrus.InfoLevel:
		return journal.PriInfo
	default:
		return journal.PriDebug
	}
}
