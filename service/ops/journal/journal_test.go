package journal

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestArgs(t *testing.T) {
	got := Args(Options{Units: []string{"clusterapp-worker@2.service"}, Since: "-10m", Lines: 20, Follow: true})
	want := []string{"--no-pager", "--quiet", "-o", "json", "-u", "clusterapp-worker@2.service", "--since", "-10m", "-n", "20", "-f"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := Args(Options{}); !reflect.DeepEqual(got[4:], []string{"-u", "clusterapp-worker@*.service"}) {
		t.Errorf("default units: %q", got)
	}
}

func TestParseAndFormat(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 890000000, time.Local)
	us := `"__REALTIME_TIMESTAMP":"` + itoa(at.UnixMicro()) + `"`
	for _, tc := range []struct{ name, line, want string }{
		{"worker line",
			`{` + us + `,"_SYSTEMD_UNIT":"clusterapp-worker@2.service","_PID":"812","MESSAGE":"level=info msg=serving\n"}`,
			"Mar  4 05:06:07.890 worker@2[812]: level=info msg=serving"},
		{"service manager line",
			`{` + us + `,"_SYSTEMD_UNIT":"init.scope","UNIT":"clusterapp-worker@1.service","_PID":"1","MESSAGE":"Started clusterapp worker 1."}`,
			"Mar  4 05:06:07.890 worker@1 (systemd): Started clusterapp worker 1."},
		{"binary message",
			`{` + us + `,"_SYSTEMD_UNIT":"clusterapp-worker@3.service","_PID":"9","MESSAGE":[104,105,255]}`,
			"Mar  4 05:06:07.890 worker@3[9]: hi\xff"},
	} {
		e, err := Parse([]byte(tc.line))
		if err != nil || e.Format() != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, e.Format(), err, tc.want)
		}
	}
	if _, err := Parse([]byte(`{"MESSAGE":`)); err == nil || !strings.Contains(err.Error(), "parse journal entry") {
		t.Errorf("torn line: %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
