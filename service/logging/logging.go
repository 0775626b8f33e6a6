// Package logging builds the worker's logrus logger.
//
// Under journald (JOURNAL_STREAM names stderr) lines carry no timestamp and
// no colours, since journald stamps each line itself, and start with a
// syslog priority prefix such as "<4>": journald's SyslogLevelPrefix= (on by
// default) turns it into the entry's PRIORITY, so `journalctl -p warning`
// and the red/bold highlighting work as for native journal clients.
package logging

import (
	"fmt"
	"io"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/sirupsen/logrus"
)

// Options for New.
type Options struct {
	Format  string       // "text" or "json"
	Level   logrus.Level // least severe level logged
	Journal bool         // stderr is connected to journald
	Out     io.Writer    // usually os.Stderr
}

// New returns a logger writing to opts.Out.
func New(opts Options) *logrus.Logger {
	l := logrus.New()
	l.SetOutput(opts.Out)
	l.SetLevel(opts.Level)
	var f logrus.Formatter = &logrus.TextFormatter{FullTimestamp: true}
	if opts.Format == "json" {
		f = &logrus.JSONFormatter{DisableTimestamp: opts.Journal}
	} else if opts.Journal {
		f = &logrus.TextFormatter{DisableTimestamp: true, DisableColors: true}
	}
	if opts.Journal {
		f = priorityFormatter{f}
	}
	l.SetFormatter(f)
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

// priority maps logrus levels to syslog priorities (sd-daemon.h).
func priority(l logrus.Level) int {
	switch l {
	case logrus.PanicLevel, logrus.FatalLevel:
		return 2 // crit
	case logrus.ErrorLevel:
		return 3
	case logrus.WarnLevel:
		return 4
	case logrus.InfoLevel:
		return 6
	default:
		return 7
	}
}
