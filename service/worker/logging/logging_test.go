package logging

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/sirupsen/logrus"
)

// noJournal is a journal whose socket does not answer.
var noJournal = journalEnv{
	enabled: func() bool { return false },
	send: func(string, journal.Priority, map[string]string) error {
		panic("sent although the journal is not enabled")
	},
}

func TestJournalLinesHavePriorityAndNoTimestamp(t *testing.T) {
	var b bytes.Buffer
	l := newLogger(Options{Format: "text", Level: logrus.InfoLevel, Journal: true, Out: &b}, noJournal)
	l.WithField("worker", "1").Warn("accept failed")
	l.Debug("hidden")
	got := b.String()
	if !strings.HasPrefix(got, "<4>") || strings.Contains(got, "time=") || strings.Contains(got, "\x1b[") {
		t.Fatalf("journal line %q", got)
	}
	if !strings.Contains(got, `msg="accept failed" worker=1`) || strings.Contains(got, "hidden") {
		t.Fatalf("journal line %q", got)
	}
}

func TestTextOutsideJournalHasTimestamp(t *testing.T) {
	var b bytes.Buffer
	New(Options{Format: "text", Level: logrus.InfoLevel, Out: &b}).Info("hello")
	if !regexp.MustCompile(`^time="\d{4}-`).MatchString(b.String()) {
		t.Fatalf("line %q", b.String())
	}
}

func TestJSON(t *testing.T) {
	var b bytes.Buffer
	newLogger(Options{Format: "json", Level: logrus.InfoLevel, Journal: true, Out: &b}, noJournal).WithField("n", 3).Error("boom")
	if got := b.String(); !strings.HasPrefix(got, `<3>{`) || !strings.Contains(got, `"n":3`) || strings.Contains(got, `"time"`) {
		t.Fatalf("line %q", got)
	}
}

// The plain format keeps the refused-configuration line as it always read:
// no quoting, so an operator (and grep) sees the value as written.
func TestPlain(t *testing.T) {
	var b bytes.Buffer
	newLogger(Options{Format: FormatPlain, Level: logrus.InfoLevel, Journal: true, Out: &b}, noJournal).
		WithField("worker", "2").Error(`invalid configuration: X="abc" is invalid`)
	if got, want := b.String(), "<3>clusterapp: invalid configuration: X=\"abc\" is invalid\n"; got != want {
		t.Fatalf("line %q, want %q", got, want)
	}
	b.Reset()
	New(Options{Format: FormatPlain, Level: logrus.InfoLevel, Out: &b}).Warn("waiting")
	if got, want := b.String(), "clusterapp: waiting\n"; got != want {
		t.Fatalf("line outside the journal %q, want %q", got, want)
	}
}

func TestPriorities(t *testing.T) {
	for level, want := range map[logrus.Level]journal.Priority{
		logrus.PanicLevel: journal.PriCrit, logrus.FatalLevel: journal.PriCrit,
		logrus.ErrorLevel: journal.PriErr, logrus.WarnLevel: journal.PriWarning,
		logrus.InfoLevel: journal.PriInfo, logrus.DebugLevel: journal.PriDebug, logrus.TraceLevel: journal.PriDebug,
	} {
		if got := priority(level); got != want {
			t.Errorf("priority(%s) = %d, want %d", level, got, want)
		}
	}
}
