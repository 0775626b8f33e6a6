package config

import (
	"errors"
	"os"
	"reflect"
	"testing"
)

// boolKeys are the boolean settings, found by their type: a boolean added
// later is tested with the others.
func boolKeys(t *testing.T) []Var {
	t.Helper()
	var vars []Var
	for _, v := range Vars() {
		if reflect.TypeOf(Config{}).Field(v.field).Type.Kind() == reflect.Bool {
			vars = append(vars, v)
		}
	}
	if len(vars) < 3 {
		t.Fatalf("found %d boolean settings, want CLUSTERAPP_BALANCE, CLUSTERAPP_ACCESS_LOG, CLUSTERAPP_DEBUG_ENDPOINTS at least", len(vars))
	}
	return vars
}

func boolField(c Config, v Var) bool { return reflect.ValueOf(c).Field(v.field).Bool() }

// Every boolean reads systemd's words for true and false, in any case, as
// systemd reads the same file's booleans; the environment is left as it was.
func TestBooleansReadAsSystemdReadsThem(t *testing.T) {
	for _, v := range boolKeys(t) {
		for raw, want := range map[string]bool{
			"1": true, "yes": true, "y": true, "true": true, "t": true, "on": true, "YES": true, "On": true, "True": true, "T": true,
			"0": false, "no": false, "n": false, "false": false, "f": false, "off": false, "NO": false, "Off": false, "FALSE": false, "F": false,
		} {
			t.Setenv(v.Key, raw)
			c, err := Load()
			if err != nil || boolField(c, v) != want {
				t.Errorf("%s=%s: %v, %v; want %v", v.Key, raw, boolField(c, v), err, want)
			}
			if got := os.Getenv(v.Key); got != raw {
				t.Errorf("%s=%s: the environment holds %q after Load", v.Key, raw, got)
			}
		}
	}
}

// A bad boolean's message lists exactly what is accepted, the same for
// every boolean: it said "true or false" and 1 was accepted.
func TestBadBooleanListsWhatIsAccepted(t *testing.T) {
	const want = "expected a boolean: 1, yes, y, true, t or on; 0, no, n, false, f or off (in any case, as systemd reads them)"
	for _, v := range boolKeys(t) {
		for _, raw := range []string{"maybe", "2", "enable", "yess", "tRuE-ish"} {
			_, err := LoadVars(map[string]string{v.Key: raw})
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Key != v.Key || ce.Problems[0].Value != raw || "expected "+ce.Problems[0].Expected != want {
				t.Errorf("%s=%s: %v, want one problem: %s", v.Key, raw, err, want)
			}
		}
	}
}
