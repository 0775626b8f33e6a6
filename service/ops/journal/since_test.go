package journal

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// sinceCases pairs values with whether journalctl --since (systemd 252)
// accepts them; each was run through journalctl.
func sinceCases() map[string]bool {
	today := time.Now().Weekday().String()
	notToday := (time.Now().Weekday() + 1) % 7
	return map[string]bool{
		"-10m": true, "+5min": true, "-1h30min": true, "- 5m": true, "-1 2": true, "-5s5": true,
		"-12.34 .56": true, "-12.34s.56": true, "-05": true, "1h30min ago": true, ".5h ago": true,
		"5 ago": true, "5min  ago": true, "1 µs ago": true, "2d left": true, "-5min ": true,
		"@1700000000": true, "@1.5": true, "@infinity": true,
		"now": true, "today": true, "yesterday": true, "tomorrow": true, "today UTC": true,
		"2025-01-02": true, "2025-01-02 15:00": true, "2025-01-02 15:00:60": true, "25-01-02": true,
		"2025-1-2 3:4": true, " 2025-01-02": true, "2025-01-0215:00": true, "2025-02-31": true,
		"15:04": true, "15:04:05.1234567": true, "15:04 UTC": true, "2025-01-02 15:00 utc": true,
		"2025-01-02 Europe/Berlin": true, "today Europe/Berlin": true, "12:00 PST8PDT": true,
		"Thu 2026-12-03": true, "thursday 2026-12-03": true, today + " 15:00": true,

		"xyz": false, "": false, "-": false, "+": false, "@": false, "@-5": false, ".": false,
		"10mins": false, "-10mins": false, "-5x": false, "-1.5.5s": false, "-1.s": false, "-.s": false,
		"-infinity": false, "+infinity": false, "infinity ago": false, "now UTC": false,
		"Europe/Berlin": false, "-10m Europe/Berlin": false, "2025-01-02 ": false,
		"Wed 2026-12-03": false, notToday.String() + " 15:00": false, "2025-13-01": false,
		"24:00": false, "yesterday 3pm": false, "2025-01-02T15:00": false, "1 2": false,
	}
}

func TestCheckSince(t *testing.T) {
	for value, want := range sinceCases() {
		err := CheckSince(value)
		if got := err == nil; got != want {
			t.Errorf("CheckSince(%q) = %v, want accepted=%v", value, err, want)
		}
		if err != nil && !errors.Is(err, ErrSince) {
			t.Errorf("CheckSince(%q) = %v, not ErrSince", value, err)
		}
	}
}

// The table is journalctl's verdict: where journalctl is installed, ask it
// (it parses --since before it opens the journal: exit 1 and "Failed to
// parse timestamp" for a value it refuses).
func TestCheckSinceAgreesWithJournalctl(t *testing.T) {
	if _, err := exec.LookPath("journalctl"); err != nil {
		t.Skip("no journalctl")
	}
	for value, want := range sinceCases() {
		out, err := exec.Command("journalctl", "--since", value, "-n", "0", "--no-pager", "-q").CombinedOutput()
		refused := err != nil && strings.Contains(string(out), "Failed to parse timestamp")
		if refused == want {
			t.Errorf("journalctl --since %q: refused=%v (%v: %s); the table says accepted=%v", value, refused, err, out, want)
		}
	}
}
