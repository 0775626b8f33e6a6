package doctor

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/ops/sockstat"
)

// A socket that cannot listen because another program holds its address
// is a problem naming the address, the program, its PID and unit, and a
// fix that is not "start it" (which fails again).
func TestSocketPortHeldByAnotherProgram(t *testing.T) {
	for _, tc := range []struct {
		name, listen, holder string
		owners               []sockstat.Process
		want                 string
	}{
		{"same address", "127.0.0.1:8080", "127.0.0.1:8080", []sockstat.Process{{PID: 812, Comm: "python3", Unit: "squatter.service"}},
			"clusterapp.socket is failed (failed): 127.0.0.1:8080 is in use by python3 (pid 812, squatter.service), so it cannot listen there (address already in use)"},
		{"every address holds ours", "127.0.0.1:8080", "0.0.0.0:8080", []sockstat.Process{{PID: 5, Comm: "nginx"}, {PID: 6, Comm: "nginx"}},
			"0.0.0.0:8080 is in use by nginx (pid 5), nginx (pid 6)"},
		{"ours is every address", "[::]:8080", "127.0.0.1:8080", nil,
			"127.0.0.1:8080 is in use by another program (run as root to see which)"},
	} {
		f := healthy()
		f.Socket.ActiveState, f.Socket.SubState, f.Socket.Listen = "failed", "failed", []string{tc.listen}
		f.Listeners = []sockstat.Listener{{Addr: netip.MustParseAddrPort(tc.holder), Inode: 77}}
		f.PortOwners = map[uint64][]sockstat.Process{77: tc.owners}
		got := find(Evaluate(f), "socket")
		if len(got) != 1 || got[0].Severity != Problem || !strings.Contains(got[0].Detail, tc.want) ||
			!strings.Contains(got[0].Fix, "stop that program or move it off the port") || !strings.HasSuffix(got[0].Fix, "systemctl restart clusterapp.socket") {
			t.Errorf("%s: %+v\nwant detail with %q", tc.name, got, tc.want)
		}
	}
	// Another address on the same port does not stop ours: the old finding.
	f := healthy()
	f.Socket.ActiveState, f.Socket.SubState, f.Socket.Listen = "inactive", "dead", []string{"127.0.0.1:8080"}
	f.Listeners = []sockstat.Listener{{Addr: netip.MustParseAddrPort("127.0.0.2:8080"), Inode: 77}}
	if got := find(Evaluate(f), "socket"); len(got) != 1 || strings.Contains(got[0].Detail, "in use") || !strings.Contains(got[0].Fix, "systemctl enable --now") {
		t.Errorf("another address on the port: %+v", got)
	}
}
