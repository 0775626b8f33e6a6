package journal

import (
	"errors"
	"strings"
	"time"
)

// ErrSince is wrapped by CheckSince's errors, for errors.Is.
var ErrSince = errors.New("journal: invalid --since time")

// SinceForms lists, for an error message, the forms CheckSince accepts.
const SinceForms = `-10m, "2h ago", now, today, yesterday, 15:04, 2025-01-02 [15:04[:05]] [UTC], @UNIX-SECONDS`

// CheckSince returns nil when journalctl --since accepts s, and an error
// wrapping ErrSince otherwise. journalctl rejects a bad time only once it
// runs, after the command's other checks (and not at all in the output a
// caller sees when it runs without the right to read the journal), so the
// command line checks it first.
//
// It transcribes parse_timestamp() of systemd 252 (src/basic/time-util.c):
// "@" and a time span; now, today, yesterday, tomorrow; "+SPAN", "-SPAN",
// "SPAN ago", "SPAN left"; otherwise an optional weekday name, then
// [YY]YY-MM-DD, [YY]YY-MM-DD HH:MM[:SS[.FRAC]] or HH:MM[:SS[.FRAC]],
// followed by " UTC", a local zone abbreviation or an IANA zone name.
func CheckSince(s string) error {
	if validSince(s) {
		return nil
	}
	return ErrSince
}

func validSince(s string) bool {
	// A last word naming a zone: systemd parses the rest under TZ=zone,
	// where the relative forms are not accepted.
	if i := strings.LastIndexByte(s, ' '); i >= 0 && !strings.EqualFold(s[i+1:], "UTC") && zoneName(s[i+1:]) {
		return absolute(s[:i])
	}
	switch {
	case strings.HasPrefix(s, "@"):
		return timeSpan(s[1:]) || infinity(s[1:])
	case s == "now":
		return true
	case strings.HasPrefix(s, "+"), strings.HasPrefix(s, "-"):
		return timeSpan(s[1:])
	case strings.HasSuffix(s, " ago"):
		return timeSpan(strings.TrimSuffix(s, " ago"))
	case strings.HasSuffix(s, " left"):
		return timeSpan(strings.TrimSuffix(s, " left"))
	}
	if len(s) > 4 && strings.EqualFold(s[len(s)-4:], " UTC") {
		return absolute(s[:len(s)-4])
	}
	for _, abbr := range localZoneAbbreviations() {
		if len(s) > len(abbr)+1 && strings.EqualFold(s[len(s)-len(abbr)-1:], " "+abbr) {
			return absolute(s[:len(s)-len(abbr)-1])
		}
	}
	return absolute(s)
}

// zoneName reports whether name is a time zone of the system's database,
// as systemd's timezone_is_valid() checks it (a file under zoneinfo).
func zoneName(name string) bool {
	if name == "" || name == "Local" || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return false
	}
	_, err := time.LoadLocation(name)
	return err == nil
}

// localZoneAbbreviations are the local zone's names in winter and summer
// (tzname[0] and tzname[1]), which systemd also accepts as a suffix.
func localZoneAbbreviations() []string {
	year := time.Now().Year()
	winter, _ := time.Date(year, time.January, 1, 0, 0, 0, 0, time.Local).Zone()
	summer, _ := time.Date(year, time.July, 1, 0, 0, 0, 0, time.Local).Zone()
	return []string{winter, summer}
}

var weekdays = []string{"Sunday", "Sun", "Monday", "Mon", "Tuesday", "Tue", "Wednesday", "Wed",
	"Thursday", "Thu", "Friday", "Fri", "Saturday", "Sat"}

// absolute is the part of parse_timestamp after the zone is taken off: a
// day word, or an optional weekday then a date and/or a time of day (the
// strptime formats systemd tries in turn). A weekday must be the date's.
func absolute(s string) bool {
	switch s {
	case "today", "yesterday", "tomorrow":
		return true
	}
	weekday := -1
	for i, name := range weekdays {
		if len(s) > len(name) && strings.EqualFold(s[:len(name)], name) && s[len(name)] == ' ' {
			weekday, s = i/2, s[len(name)+1:]
			break
		}
	}
	if y, m, d, rest, ok := parseDate(s); ok {
		if weekday >= 0 && int(time.Date(y, time.Month(m), d, 12, 0, 0, 0, time.UTC).Weekday()) != weekday {
			return false
		}
		// strptime's " " between the date and the time matches any
		// run of white space, none included.
		return rest == "" || timeOfDay(strings.TrimLeft(rest, " \t\n"))
	}
	// A time of day is today's: a weekday before it must be today's.
	if weekday >= 0 && int(time.Now().Weekday()) != weekday {
		return false
	}
	return timeOfDay(s)
}

// parseDate reads [YY]YY-MM-DD from the front of s, as strptime's
// "%Y-%m-%d" does (fields of up to 4, 2 and 2 digits).
func parseDate(s string) (year, month, day int, rest string, ok bool) {
	year, s, ok = number(s, 4, 0, 9999)
	if !ok || !strings.HasPrefix(s, "-") {
		return 0, 0, 0, "", false
	}
	if month, s, ok = number(s[1:], 2, 1, 12); !ok || !strings.HasPrefix(s, "-") {
		return 0, 0, 0, "", false
	}
	if day, s, ok = number(s[1:], 2, 1, 31); !ok {
		return 0, 0, 0, "", false
	}
	return year, month, day, s, true
}

// timeOfDay is HH:MM, HH:MM:SS or HH:MM:SS.FRAC (FRAC: digits).
func timeOfDay(s string) bool {
	var ok bool
	if _, s, ok = number(s, 2, 0, 23); !ok || !strings.HasPrefix(s, ":") {
		return false
	}
	if _, s, ok = number(s[1:], 2, 0, 59); !ok {
		return false
	}
	if s == "" {
		return true
	}
	if !strings.HasPrefix(s, ":") {
		return false
	}
	if _, s, ok = number(s[1:], 2, 0, 61); !ok {
		return false
	}
	if strings.HasPrefix(s, ".") {
		s = strings.TrimLeft(s[1:], "0123456789")
	}
	return s == ""
}

// number reads up to width digits, after optional spaces (strptime skips
// them), and checks the value is in [lo, hi].
func number(s string, width, lo, hi int) (n int, rest string, ok bool) {
	s = strings.TrimLeft(s, " \t\n")
	i := 0
	for ; i < len(s) && i < width && s[i] >= '0' && s[i] <= '9'; i++ {
		n = n*10 + int(s[i]-'0')
	}
	if i == 0 || n < lo || n > hi {
		return 0, "", false
	}
	return n, s[i:], true
}

// spanUnits are parse_sec()'s units, in its order: the first prefix that
// matches is taken, so "10mins" leaves an "s" that is not a number.
var spanUnits = []string{"seconds", "second", "sec", "s", "minutes", "minute", "min",
	"months", "month", "M", "msec", "ms", "m", "hours", "hour", "hr", "h", "days", "day", "d",
	"weeks", "week", "w", "years", "year", "y", "usec", "us", "μs", "µs"}

// timeSpan is parse_sec()'s time span ("5min", "1h 30m", "1.5d", "90":
// seconds): numbers, each with an optional unit, white space allowed
// around units; a number followed at once by what is not a unit ("1.5.5s",
// "10mins") is refused. "infinity" is a span too, but only "@" takes it:
// added to or taken from now, systemd refuses it as an overflow.
func timeSpan(s string) bool {
	something := false
	for {
		s = strings.TrimLeft(s, " \t\n")
		if s == "" {
			return something
		}
		digits := strings.TrimLeft(s, "0123456789")
		whole := len(s) - len(digits)
		if strings.HasPrefix(digits, ".") {
			rest := strings.TrimLeft(digits[1:], "0123456789")
			if len(rest) == len(digits)-1 {
				return false // "1." or ".": a fraction needs a digit
			}
			digits = rest
		} else if whole == 0 {
			return false
		}
		afterUnit := strings.TrimLeft(digits, " \t\n")
		unit := ""
		for _, u := range spanUnits {
			if strings.HasPrefix(afterUnit, u) {
				unit = u
				break
			}
		}
		if unit == "" && digits != "" && len(afterUnit) == len(digits) {
			return false
		}
		s, something = afterUnit[len(unit):], true
	}
}

func infinity(s string) bool {
	return strings.Trim(s, " \t\n") == "infinity"
}
