package worker

import (
	"bytes"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/worker/logging"
	"github.com/sirupsen/logrus"
)

// A GOMAXPROCS the Go runtime applies is the operator's; one it ignores
// counts as unset, with a warning naming it and what is expected.
func TestOperatorProcs(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		operator bool
		warning  string
	}{
		{env: map[string]string{}, operator: false},
		{env: map[string]string{"GOMAXPROCS": "3"}, operator: true},
		{env: map[string]string{"GOMAXPROCS": "3n"}, operator: false, warning: `GOMAXPROCS="3n": expected a whole number from 1`},
		{env: map[string]string{"GOMAXPROCS": ""}, operator: false, warning: `GOMAXPROCS="": expected a whole number from 1`},
		{env: map[string]string{"GOMAXPROCS": "0"}, operator: false, warning: `GOMAXPROCS="0"`},
	} {
		var out bytes.Buffer
		log := logrus.New()
		log.SetOutput(&out)
		log.SetFormatter(&logrus.TextFormatter{DisableQuote: true})
		lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
		if got := operatorProcs(lookup, logrus.NewEntry(log)); got != tc.operator {
			t.Errorf("%v: operator's GOMAXPROCS = %v, want %v", tc.env, got, tc.operator)
		}
		if tc.warning == "" {
			if out.Len() != 0 {
				t.Errorf("%v: logged %q", tc.env, out.String())
			}
			continue
		}
		for _, want := range []string{"level=warning", tc.warning, "variable=" + config.GOMAXPROCS, logging.MsgInvalidConfig} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: the warning %q lacks %q", tc.env, out.String(), want)
			}
		}
	}
}
