package systemd_test

import (
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// `status` and `logs` work for an operator in the adm group without root:
// status reads the units over the D-Bus system bus, logs reads the journal
// the group may read. A user in no journal group is told why, instead of
// an empty log; commands that change units still need root.
func TestStatusAndLogsWithoutRoot(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	b.Start(2)
	b.Must("useradd", "--no-create-home", "--groups", "adm", "op")
	b.Must("useradd", "--no-create-home", "stranger")
	as := func(user string, args ...string) (string, error) {
		return b.Run(append([]string{"runuser", "-u", user, "--", "clusterapp"}, args...)...)
	}

	out, err := as("op", "status")
	if err != nil || !strings.Contains(out, "active/running") || strings.Count(out, "active/running") < 2 {
		t.Errorf("status as a member of adm: %v\n%s", err, out)
	}
	out, err = as("op", "logs", "-n", "50")
	if err != nil || !strings.Contains(out, "worker@1[") {
		t.Errorf("logs as a member of adm: %v\n%s", err, out)
	}
	out, err = as("stranger", "logs", "-n", "5")
	if err == nil || !strings.Contains(out, "systemd-journal or adm group") {
		t.Errorf("logs as a user in no journal group: %v, want an error naming the groups\n%s", err, out)
	}
	out, err = as("op", "reload")
	if err == nil || !strings.Contains(out, "root") {
		t.Errorf("reload as a non-root operator: %v, want an error saying it needs root\n%s", err, out)
	}
}
