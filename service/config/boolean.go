package config

import (
	"reflect"
	"strconv"
	"strings"
)

// boolWords are the values a boolean setting takes: systemd's own
// (parse_boolean() in src/basic/parse-util.c, any case), which operators of
// systemd software write in its environment files. envconfig alone reads
// strconv.ParseBool's, a subset (1, t, T, TRUE, true, True and the same for
// false), so CLUSTERAPP_DEBUG_ENDPOINTS=yes stopped the worker while
// DEBUG_ENDPOINTS=1 served, and the message said only "true or false".
var boolWords = map[string]bool{
	"1": true, "yes": true, "y": true, "true": true, "t": true, "on": true,
	"0": false, "no": false, "n": false, "false": false, "f": false, "off": false,
}

// boolExpected says what a boolean setting accepts: exactly boolWords.
const boolExpected = "a boolean: 1, yes, y, true, t or on; 0, no, n, false, f or off (in any case, as systemd reads them)"

// ParseBool reads a boolean setting's value the way systemd reads a
// boolean: (value, true) for one of 1, yes, y, true, t, on, 0, no, n,
// false, f, off in any case; (false, false) for anything else.
func ParseBool(s string) (value, ok bool) {
	value, ok = boolWords[strings.ToLower(s)]
	return value, ok
}

// boolValue checks a boolean setting's value and gives it in the form
// envconfig reads ("true" or "false"): ("", problem, true) when v is a
// boolean and raw is not one of boolWords, (canonical, _, false) when it
// is, and (raw, _, false) for any other setting.
func boolValue(v Var, raw string) (canonical string, p Problem, bad bool) {
	if reflect.TypeOf(Config{}).Field(v.field).Type.Kind() != reflect.Bool {
		return raw, Problem{}, false
	}
	b, ok := ParseBool(raw)
	if !ok {
		return "", Problem{Key: v.Key, Value: raw, Expected: boolExpected}, true
	}
	return strconv.FormatBool(b), Problem{}, false
}
