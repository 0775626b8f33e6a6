package logging

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

func TestJournalLinesHavePriorityAndNoTimestamp(t *testing.T) {
	var b bytes.Buffer
	l := New(Options{Format: "text", Level: logrus.InfoLevel, Journal: true, Out: &b})
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
	New(Options{Format: "json", Level: logrus.InfoLevel, Journal: true, Out: &b}).WithField("n", 3).Error("boom")
	if got := b.String(); !strings.HasPrefix(got, `<3>{`) || !strings.Contains(got, `"n":3`) || strings.Contains(got, `"time"`) {
		t.Fatalf("line %q", got)
	}
}
