package systemd_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// When another program (not systemd) holds the service port,
// clusterapp.socket cannot listen, and doctor names the cause: the address
// is in use, by which program, with its PID and unit, and how to fix it.
// It used to say only that the socket was failed and to start it, which
// fails again; status showed the other program's queue as the socket's
// ("listening on 127.0.0.1:8080"); systemd's journal says "Input/output
// error" (252 binds in a child) and the unit's result "resources".
func TestDoctorNamesTheProgramHoldingThePort(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	squatPort(b)
	if out, err := b.Run("systemctl", "start", config.SocketUnit); err == nil {
		t.Fatalf("clusterapp.socket started on a port another program holds:\n%s", out)
	}
	pid := b.MainPID("squatter.service")
	// status no longer shows the other program's queue as the socket's.
	status, _ := b.Run("clusterapp", "status")
	if !strings.Contains(status, "clusterapp.socket: failed/failed") || strings.Contains(status, "listening on 127.0.0.1:8080") ||
		!strings.Contains(status, "not listening: 127.0.0.1:8080 is in use by another program (clusterapp doctor names it)") {
		t.Errorf("clusterapp status:\n%s", status)
	}
	out, err := b.Run("clusterapp", "doctor")
	t.Logf("clusterapp doctor:\n%s", out)
	want := []string{
		"FAIL  socket", "clusterapp.socket is failed",
		"127.0.0.1:8080 is in use by python3 (pid " + strconv.Itoa(pid) + ", squatter.service)",
		"address already in use",
		"fix: stop that program or move it off the port",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("doctor lacks %q", w)
		}
	}
	if err == nil {
		t.Error("doctor passed with the port held by another program")
	}
	if strings.Contains(out, "fix: systemctl enable --now") {
		t.Error("doctor still offers to start a socket that cannot listen")
	}
}
