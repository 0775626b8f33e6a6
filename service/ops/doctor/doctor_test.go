package doctor

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/ops/sockstat"
	"github.com/clusterapp/clusterapp/service/ops/units"
)

func healthy() Facts {
	props := map[string]any{}
	for _, h := range hardening {
		props[h.prop] = h.want
	}
	return Facts{
		EnvFile: "/etc/clusterapp/clusterapp.env", Configured: 2,
		Wanted: []string{config.WorkerUnit(1), config.WorkerUnit(2)},
		Workers: []units.Worker{
			{Unit: config.WorkerUnit(1), Number: 1, ActiveState: "active", SubState: "running", PID: 10, LimitNOFILE: 65536, Watchdog: 10 * time.Second, LastPingMono: 99 * time.Second},
			{Unit: config.WorkerUnit(2), Number: 2, ActiveState: "active", SubState: "running", PID: 11, LimitNOFILE: 65536, Watchdog: 10 * time.Second, LastPingMono: 98 * time.Second},
		},
		ProcStates: map[int]byte{10: 'S', 11: 'R'}, Now: 100 * time.Second,
		Socket:    units.SocketState{LoadState: "loaded", ActiveState: "active", SubState: "listening", Listen: []string{"[::]:8080"}, Backlog: 4096},
		Listeners: []sockstat.Listener{{Addr: netip.MustParseAddrPort("[::]:8080")}},
		Somaxconn: 4096, PortRange: [2]int{32768, 60999},
		OpenFiles: map[int]int{10: 65536, 11: 65536}, ManagerHardNOFILE: 524288,
		WorkerProps: props,
	}
}

// find returns the findings of one check.
func find(fs []Finding, check string) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

func TestHealthy(t *testing.T) {
	fs := Evaluate(healthy())
	for _, f := range fs {
		if f.Severity != OK {
			t.Errorf("healthy facts gave %v %s: %s", f.Severity, f.Check, f.Detail)
		}
	}
}

func TestGaps(t *testing.T) {
	for _, tc := range []struct {
		name, check string
		sev         Severity
		fix         string
		change      func(*Facts)
	}{
		{"somaxconn below backlog", "somaxconn", Problem, "sysctl -w net.core.somaxconn=4096", func(f *Facts) { f.Somaxconn = 128 }},
		{"socket stopped", "socket", Problem, "systemctl enable --now clusterapp.socket", func(f *Facts) { f.Socket.ActiveState = "inactive"; f.Listeners = nil }},
		{"narrow port range", "port range", Problem, "ip_local_port_range", func(f *Facts) { f.PortRange = [2]int{60000, 60999} }},
		{"listen port in the range", "port range", Warning, "ip_local_reserved_ports=8080", func(f *Facts) { f.PortRange = [2]int{1024, 65535} }},
		{"another service's port in the range", "port range", Warning, "ip_local_reserved_ports=8080,9180,11211 and persist", func(f *Facts) {
			f.PortRange = [2]int{10000, 65000} // the shipped range
			f.Reserved = [][2]int{{8080, 8080}, {9180, 9180}}
			f.AllListeners = []sockstat.Listener{{Addr: netip.MustParseAddrPort("127.0.0.1:11211")}, {Addr: netip.MustParseAddrPort("0.0.0.0:22")}}
		}},
		{"worker stopped", "workers", Problem, "systemctl start clusterapp.target", func(f *Facts) { f.Workers[1].ActiveState = "inactive" }},
		{"workers down with the socket", "workers", Problem, "fix the socket first", func(f *Facts) {
			f.Socket.ActiveState, f.Listeners = "failed", nil
			f.Workers[0].ActiveState, f.Workers[1].ActiveState = "inactive", "inactive"
		}},
		{"surplus worker", "workers", Warning, "clusterapp scale 1", func(f *Facts) {
			f.Configured = 1
			f.Wanted = f.Wanted[:1]
		}},
		{"generator not rerun", "workers", Problem, "systemctl daemon-reload", func(f *Facts) { f.Configured = 3 }},
		{"limit not applied", "file limit", Problem, "clusterapp reload", func(f *Facts) { f.OpenFiles[11] = 1024 }},
		{"limit capped by PID 1", "file limit", Warning, "CLUSTERAPP_LIMIT_NOFILE", func(f *Facts) {
			f.OpenFiles = map[int]int{10: 20000, 11: 20000}
			f.ManagerHardNOFILE = 20000
		}},
		{"worker stopped by a signal", "progress", Problem, "kill -CONT 11", func(f *Facts) { f.ProcStates[11] = 'T' }},
		{"worker hung", "progress", Problem, "systemctl kill -s SIGABRT clusterapp-worker@2.service", func(f *Facts) { f.Now = 104 * time.Second }},
		{"overflows", "listen queue", Warning, "clusterapp scale", func(f *Facts) { f.Counters.Overflows = 3 }},
		{"hardening weakened", "hardening", Problem, "systemctl cat", func(f *Facts) { f.WorkerProps["PrivateNetwork"] = false }},
	} {
		f := healthy()
		tc.change(&f)
		found := find(Evaluate(f), tc.check)
		hit := false
		for _, f := range found {
			hit = hit || f.Severity == tc.sev && strings.Contains(f.Fix, tc.fix)
		}
		if !hit {
			t.Errorf("%s: findings %+v; want %v with a fix mentioning %q", tc.name, found, tc.sev, tc.fix)
		}
	}
}

func TestParseOpenFileLimit(t *testing.T) {
	limits := "Limit                     Soft Limit           Hard Limit           Units     \n" +
		"Max open files            20000                524288               files     \n" +
		"Max locked memory         unlimited            unlimited            bytes     \n"
	soft, hard, err := ParseOpenFileLimit(limits)
	if err != nil || soft != 20000 || hard != 524288 {
		t.Fatalf("got %d %d %v", soft, hard, err)
	}
	if _, _, err := ParseOpenFileLimit("Max processes 1 2 processes\n"); err == nil {
		t.Error("missing line not reported")
	}
}

// A listening port inside the range is fine once reserved, alone or in a range.
func TestReservedPortsQuietTheWarning(t *testing.T) {
	f := healthy()
	f.PortRange = [2]int{1024, 65535}
	f.Reserved, _ = ParsePortList("8000-8100,9180")
	f.AllListeners = []sockstat.Listener{{Addr: netip.MustParseAddrPort("127.0.0.1:9180")}}
	if got := checkPortRange(f); got.Severity != OK {
		t.Errorf("reserved listening ports: %+v", got)
	}
	if _, err := ParsePortList("80,x"); err == nil {
		t.Error("ParsePortList accepted x")
	}
}

func TestOnPorts(t *testing.T) {
	ls := []sockstat.Listener{{Addr: netip.MustParseAddrPort("[::]:8080")}, {Addr: netip.MustParseAddrPort("127.0.0.1:22")}}
	if got := OnPorts(ls, []string{"[::]:8080", "/run/x.sock"}); len(got) != 1 || got[0].Addr.Port() != 8080 {
		t.Errorf("got %v", got)
	}
}
