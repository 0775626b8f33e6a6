package logging

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/sirupsen/logrus"
)

// sent is one entry a recordingJournal received.
type sent struct {
	message  string
	priority journal.Priority
	vars     map[string]string
}

// recordingJournal is an enabled journal that keeps what it is sent and
// fails while fail is set.
type recordingJournal struct {
	entries []sent
	fail    error
}

func (r *recordingJournal) env() journalEnv {
	return journalEnv{
		enabled: func() bool { return true },
		send: func(msg string, p journal.Priority, vars map[string]string) error {
			if r.fail != nil {
				return r.fail
			}
			r.entries = append(r.entries, sent{msg, p, vars})
			return nil
		},
	}
}

func TestNativeEntryCarriesFields(t *testing.T) {
	var j recordingJournal
	var out bytes.Buffer
	l := newLogger(Options{Format: FormatText, Level: logrus.InfoLevel, Journal: true, Out: &out}, j.env())
	l.WithField(WorkerKey, "2").WithFields(Event(MsgReady)).WithField("took", "1.5s").Warn("accept failed")
	if out.Len() != 0 {
		t.Fatalf("a sent entry was also written to stderr: %q", out.String())
	}
	if len(j.entries) != 1 {
		t.Fatalf("%d entries sent, want 1", len(j.entries))
	}
	e := j.entries[0]
	// MESSAGE= reads as the stderr line did, without the prefix or the id.
	if want := `level=warning msg="accept failed" took=1.5s worker=2`; e.message != want {
		t.Errorf("MESSAGE=%q, want %q", e.message, want)
	}
	if e.priority != journal.PriWarning {
		t.Errorf("PRIORITY=%d, want %d", e.priority, journal.PriWarning)
	}
	want := map[string]string{"SYSLOG_IDENTIFIER": "clusterapp", "WORKER": "2", "MESSAGE_ID": MsgReady, "TOOK": "1.5s"}
	if fmt.Sprint(e.vars) != fmt.Sprint(want) {
		t.Errorf("fields %v, want %v", e.vars, want)
	}
}

// A send that fails writes the stderr line instead, with its priority
// prefix; the first failure of a run says why, once.
func TestFailedSendFallsBackToStderr(t *testing.T) {
	j := recordingJournal{fail: errors.New("sendmsg: no such file or directory")}
	var out bytes.Buffer
	l := newLogger(Options{Format: FormatText, Level: logrus.InfoLevel, Journal: true, Out: &out}, j.env())
	log := l.WithField(WorkerKey, "2")
	log.WithFields(Event(MsgDraining)).Info("draining")
	log.Error("second")
	j.fail = nil
	log.Info("sent")
	j.fail = errors.New("sendmsg: connection refused")
	log.Warn("third")

	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		`^<4>clusterapp: cannot send to the journal natively, .*: sendmsg: no such file or directory$`,
		`^<6>level=info msg=draining message_id=` + MsgDraining + ` worker=2$`,
		`^<3>level=error msg=second worker=2$`,
		`^<4>clusterapp: cannot send to the journal natively, .*: sendmsg: connection refused$`,
		`^<4>level=warning msg=third worker=2$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], re)
		}
	}
	if len(j.entries) != 1 || j.entries[0].message != "level=info msg=sent worker=2" {
		t.Errorf("sent %v, want the one entry logged while the journal worked", j.entries)
	}
}

// The entry's own Buffer is left to the stderr line: formatting MESSAGE=
// into it first would write the line twice on a fallback.
func TestFallbackLineIsWrittenOnce(t *testing.T) {
	j := recordingJournal{fail: errors.New("refused")}
	var out bytes.Buffer
	l := newLogger(Options{Format: FormatJSON, Level: logrus.InfoLevel, Journal: true, Out: &out}, j.env())
	l.Info("one")
	l.Info("two")
	if got := strings.Count(out.String(), `"msg":"one"`) + strings.Count(out.String(), `"msg":"two"`); got != 2 {
		t.Fatalf("stderr:\n%s", out.String())
	}
}

func TestNotSentWhenJournalSocketMissing(t *testing.T) {
	var out bytes.Buffer
	newLogger(Options{Format: FormatText, Level: logrus.InfoLevel, Journal: true, Out: &out}, noJournal).WithField(WorkerKey, "1").Info("serving")
	if got := out.String(); got != "<6>level=info msg=serving worker=1\n" {
		t.Fatalf("line %q", got)
	}
}

func TestFieldName(t *testing.T) {
	for key, want := range map[string]string{
		"worker":                "WORKER",
		"message_id":            "MESSAGE_ID",
		"error":                 "ERROR",
		"gomemlimit_bytes":      "GOMEMLIMIT_BYTES",
		"Probe-Every":           "PROBE_EVERY",
		"a.b c":                 "A_B_C",
		"größe":                 "GR__E",
		"_pid":                  "FIELD__PID",
		"2xx":                   "FIELD_2XX",
		"":                      "FIELD_",
		"message":               "FIELD_MESSAGE",
		"priority":              "FIELD_PRIORITY",
		"syslog_identifier":     "FIELD_SYSLOG_IDENTIFIER",
		strings.Repeat("x", 70): strings.Repeat("X", 64),
	} {
		got := FieldName(key)
		if got != want {
			t.Errorf("FieldName(%q) = %q, want %q", key, got, want)
		}
		if !regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`).MatchString(got) {
			t.Errorf("FieldName(%q) = %q, which journald refuses", key, got)
		}
	}
}

// A field cannot replace the entry's own MESSAGE=, PRIORITY= or identifier,
// and two keys with one name give one field, deterministically.
func TestJournalFieldsCollide(t *testing.T) {
	got := journalFields(logrus.Fields{"message": "m", "a-b": 1, "a.b": 2, "syslog_identifier": "evil"})
	want := map[string]string{"SYSLOG_IDENTIFIER": "clusterapp", "FIELD_MESSAGE": "m", "A_B": "1", "FIELD_SYSLOG_IDENTIFIER": "evil"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
}
