package doctor

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/ops/liveness"
	"github.com/clusterapp/clusterapp/service/ops/sockstat"
	"github.com/clusterapp/clusterapp/service/ops/units"
	"github.com/clusterapp/clusterapp/service/worker/watchdog"
)

// minEphemeralPorts is the smallest ip_local_port_range width not flagged:
// every outgoing connection (to a database, an upstream) holds one port for
// its life plus TIME_WAIT, and the kernel's default is 28232.
const minEphemeralPorts = 10000

func checkSocket(f Facts) Finding {
	const name = "socket"
	s := f.Socket
	if s.ActiveState != "active" {
		if held := heldByOthers(f); held != "" {
			return bad(Problem, name, fmt.Sprintf("%s is %s (%s): %s, so it cannot listen there (address already in use)", config.SocketUnit, s.ActiveState, s.SubState, held),
				"stop that program or move it off the port, or move clusterapp to a free one (CLUSTERAPP_LISTEN in "+f.EnvFile+", then systemctl daemon-reload); then systemctl restart "+config.SocketUnit)
		}
		return bad(Problem, name, fmt.Sprintf("%s is %s (%s): nothing holds the port", config.SocketUnit, s.ActiveState, s.SubState),
			"systemctl enable --now "+config.SocketUnit)
	}
	if len(f.Listeners) == 0 {
		return bad(Problem, name, fmt.Sprintf("%s is active but no LISTEN socket on %s in this network namespace", config.SocketUnit, join(s.Listen)),
			"systemctl restart "+config.SocketUnit+" and check its journal: journalctl -u "+config.SocketUnit)
	}
	waiting := 0
	for _, l := range f.Listeners {
		waiting += l.Queued
	}
	return ok(name, fmt.Sprintf("%s listening on %s, Backlog=%d, %d waiting to be accepted", config.SocketUnit, join(s.Listen), s.Backlog, waiting))
}

// heldByOthers names the listeners on the addresses of a socket that is
// not active, and the processes holding them: "127.0.0.1:8080 is in use by
// python3 (pid 812, squatter.service)"; "" when there are none. systemd's
// own word for it is less help: the unit's result is "resources", and
// systemd 252, binding in a child process, logs "Input/output error".
func heldByOthers(f Facts) string {
	var held []string
	for _, l := range f.Listeners {
		if !slices.ContainsFunc(f.Socket.Listen, func(addr string) bool { return conflicts(addr, l) }) {
			continue
		}
		who := "another program (run as root to see which)"
		if owners := f.PortOwners[l.Inode]; len(owners) > 0 {
			names := make([]string, len(owners))
			for i, p := range owners {
				names[i] = p.String()
			}
			who = join(names)
		}
		held = append(held, l.Addr.String()+" is in use by "+who)
	}
	return strings.Join(held, "; ")
}

// conflicts reports whether listener l keeps a socket configured at addr
// (as systemd prints Listen=: "127.0.0.1:8080", "[::]:8080") from binding:
// the same port, and the same address or either one every address. An
// address netip cannot read is judged by its port alone.
func conflicts(addr string, l sockstat.Listener) bool {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return strings.HasSuffix(addr, ":"+strconv.Itoa(int(l.Addr.Port()))) || addr == strconv.Itoa(int(l.Addr.Port()))
	}
	a, b := ap.Addr().Unmap(), l.Addr.Addr().Unmap()
	return ap.Port() == l.Addr.Port() && (a == b || a.IsUnspecified() || b.IsUnspecified())
}

func checkSomaxconn(f Facts) Finding {
	const name = "somaxconn"
	want := f.Socket.Backlog
	if f.Somaxconn < want {
		return bad(Problem, name, fmt.Sprintf("net.core.somaxconn is %d, below the socket's Backlog=%d: the kernel caps every new listen queue at %d", f.Somaxconn, want, f.Somaxconn),
			fmt.Sprintf("sysctl -w net.core.somaxconn=%d, persist it in /etc/sysctl.d/, then systemctl restart %s (the cap applies when the socket starts listening)", want, config.SocketUnit))
	}
	return ok(name, fmt.Sprintf("net.core.somaxconn=%d >= Backlog=%d", f.Somaxconn, want))
}

func checkPortRange(f Facts) Finding {
	const name = "port range"
	lo, hi := f.PortRange[0], f.PortRange[1]
	width := hi - lo + 1
	detail := fmt.Sprintf("net.ipv4.ip_local_port_range is %d-%d (%d ports)", lo, hi, width)
	if width < minEphemeralPorts {
		return bad(Problem, name, detail+fmt.Sprintf(": fewer than %d ports for outgoing connections", minEphemeralPorts),
			"sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\" and persist it in /etc/sysctl.d/")
	}
	// Any listening port of the host in the range, not only ours: an
	// outgoing connection can take it as its source port while that
	// service restarts, and the service then cannot bind it.
	var exposed []int
	for _, l := range append(append([]sockstat.Listener(nil), f.Listeners...), f.AllListeners...) {
		p := int(l.Addr.Port())
		if p >= lo && p <= hi && !reserved(f.Reserved, p) && !slices.Contains(exposed, p) {
			exposed = append(exposed, p)
		}
	}
	if len(exposed) > 0 {
		slices.Sort(exposed)
		list := make([]string, 0, len(f.Reserved)+len(exposed))
		for _, r := range f.Reserved {
			if r[0] == r[1] {
				list = append(list, strconv.Itoa(r[0]))
			} else {
				list = append(list, fmt.Sprintf("%d-%d", r[0], r[1]))
			}
		}
		for _, p := range exposed {
			list = append(list, strconv.Itoa(p))
		}
		return bad(Warning, name, detail+fmt.Sprintf(": it includes the listening port(s) %v, not reserved: an outgoing connection could take one as its source port while its service restarts", exposed),
			fmt.Sprintf("sysctl -w net.ipv4.ip_local_reserved_ports=%s and persist it in /etc/sysctl.d/ (the key replaces the whole list)", strings.Join(list, ",")))
	}
	return ok(name, detail)
}

func reserved(rs [][2]int, port int) bool {
	for _, r := range rs {
		if port >= r[0] && port <= r[1] {
			return true
		}
	}
	return false
}

func checkWorkers(f Facts) []Finding {
	const name = "workers"
	var out []Finding
	if f.ConfigError != "" {
		out = append(out, bad(Problem, "env file", f.ConfigError, "clusterapp config --check "+f.EnvFile))
	}
	if len(f.Wanted) != f.Configured {
		out = append(out, bad(Problem, name, fmt.Sprintf("%s asks for %d workers but %s wants %d: the units predate the file", f.EnvFile, f.Configured, config.TargetUnit, len(f.Wanted)),
			"systemctl daemon-reload, then clusterapp scale "+fmt.Sprint(f.Configured)))
	}
	active := map[int]units.Worker{}
	for _, w := range f.Workers {
		if w.Active() {
			active[w.Number] = w
		}
	}
	var down, extra []string
	for i := 1; i <= f.Configured; i++ {
		if _, up := active[i]; !up {
			down = append(down, config.WorkerUnit(i))
		}
	}
	for n, w := range active {
		if n < 1 || n > f.Configured {
			extra = append(extra, w.Unit)
		}
	}
	switch {
	case len(down) > 0 && f.Socket.ActiveState != "active":
		// The workers require the socket: starting them fails until the
		// socket finding above is fixed, and starting the socket brings
		// them (the first connection starts the pool).
		out = append(out, bad(Problem, name, fmt.Sprintf("%s configured, %d running; not running: %s, and they cannot start while %s is %s", plural(f.Configured, "worker", "workers"), f.Configured-len(down), join(down), config.SocketUnit, f.Socket.ActiveState),
			"fix the socket first (the \"socket\" finding); once it listens, the first connection starts the pool, or systemctl start "+config.TargetUnit))
	case len(down) > 0:
		out = append(out, bad(Problem, name, fmt.Sprintf("%s configured, %d running; not running: %s", plural(f.Configured, "worker", "workers"), f.Configured-len(down), join(down)),
			"systemctl start "+config.TargetUnit+" (starts every configured worker; see clusterapp status and clusterapp logs for why one stopped)"))
	case len(extra) > 0:
		out = append(out, bad(Warning, name, fmt.Sprintf("%s configured but also running: %s", plural(f.Configured, "worker", "workers"), join(extra)),
			fmt.Sprintf("clusterapp scale %d (stops the surplus)", f.Configured)))
	default:
		out = append(out, ok(name, fmt.Sprintf("%s configured, all running", plural(f.Configured, "worker", "workers"))))
	}
	return out
}

// checkProgress finds running workers that make no progress: stopped by a
// signal or a debugger, or without a watchdog ping for longer than the
// worker pings (package liveness). systemd calls them active/running until
// its watchdog fires, so checkWorkers alone passes them.
func checkProgress(f Facts) []Finding {
	const name = "progress"
	var out []Finding
	every := time.Duration(0)
	for _, w := range f.Workers {
		v := liveness.Judge(liveness.FactsOf(w, f.Now, f.ProcStates[w.PID]))
		every = max(every, w.Watchdog)
		switch v.State {
		case liveness.Stopped:
			out = append(out, bad(Problem, name, fmt.Sprintf("%s (pid %d): %s", w.Unit, w.PID, v.Problem),
				fmt.Sprintf("kill -CONT %d if it was stopped on purpose (kill -STOP, a debugger); otherwise systemd's watchdog kills it (SIGABRT, its stacks in the journal: clusterapp logs --worker %d) and restarts it", w.PID, w.Number)))
		case liveness.Stalled:
			out = append(out, bad(Problem, name, fmt.Sprintf("%s (pid %d): %s", w.Unit, w.PID, v.Problem),
				fmt.Sprintf("wait for systemd's watchdog, or end it now: systemctl kill -s SIGABRT %s; either way its goroutine stacks go to the journal (clusterapp logs --worker %d shows where it hung) and systemd restarts it", w.Unit, w.Number)))
		}
	}
	if len(out) == 0 {
		detail := "no running worker is stopped"
		if every > 0 {
			interval, _ := watchdog.Every(every)
			detail = fmt.Sprintf("every running worker pings systemd's watchdog on time (every %s) and none is stopped", interval.Round(100*time.Millisecond))
		}
		out = append(out, ok(name, detail))
	}
	return out
}

func checkFileLimits(f Facts) []Finding {
	const name = "file limit"
	var out []Finding
	for _, w := range f.Workers {
		got, known := f.OpenFiles[w.PID]
		if !w.Active() || w.PID == 0 || !known {
			continue
		}
		detail := fmt.Sprintf("%s (pid %d) may open %d files; its unit asks LimitNOFILE=%d", w.Unit, w.PID, got, w.LimitNOFILE)
		switch {
		case uint64(got) >= w.LimitNOFILE:
		case f.ManagerHardNOFILE > 0 && uint64(got) == f.ManagerHardNOFILE:
			out = append(out, bad(Warning, name, detail+fmt.Sprintf(", capped by the service manager's own hard limit %d (it lacks CAP_SYS_RESOURCE to raise it, as in a container)", f.ManagerHardNOFILE),
				"raise the container's or the machine's hard limit for PID 1, or set CLUSTERAPP_LIMIT_NOFILE to what is available"))
		default:
			out = append(out, bad(Problem, name, detail, fmt.Sprintf("systemctl daemon-reload && clusterapp reload (the limit applies to new processes; check systemctl cat %s for an override)", w.Unit)))
		}
	}
	if len(out) == 0 {
		out = append(out, ok(name, "every running worker has the open-file limit its unit asks for"))
	}
	return out
}

func checkOverflows(f Facts) Finding {
	const name = "listen queue"
	c := f.Counters
	if c.Overflows > 0 || c.Drops > 0 {
		return bad(Warning, name, fmt.Sprintf("the kernel counted %d accept-queue overflows and %d listen drops since this network namespace started (all listening sockets)", c.Overflows, c.Drops),
			"if they grow under load (watch: grep TcpExt /proc/net/netstat), add workers (clusterapp scale) or raise CLUSTERAPP_BACKLOG with net.core.somaxconn")
	}
	return ok(name, "no accept-queue overflow or listen drop counted (ListenOverflows, ListenDrops)")
}

// hardening lists properties of the worker unit that must keep their
// shipped values: they carry most of the unit's low exposure score.
var hardening = []struct {
	prop string
	want any
}{
	{"NoNewPrivileges", true},
	{"DynamicUser", true},
	{"CapabilityBoundingSet", uint64(0)},
	{"PrivateNetwork", true},
	{"PrivateUsers", true},
	{"PrivateTmp", true},
	{"PrivateDevices", true},
	{"ProtectSystem", "strict"},
	{"ProtectHome", "yes"},
	{"ProtectKernelTunables", true},
	{"ProtectKernelModules", true},
	{"ProtectControlGroups", true},
	{"MemoryDenyWriteExecute", true},
	{"RestrictRealtime", true},
	{"LockPersonality", true},
}

func checkHardening(f Facts) Finding {
	const name = "hardening"
	var weak []string
	for _, h := range hardening {
		if got, found := f.WorkerProps[h.prop]; !found || got != h.want {
			weak = append(weak, fmt.Sprintf("%s=%v (want %v)", h.prop, got, h.want))
		}
	}
	if len(weak) > 0 {
		return bad(Problem, name, "the worker unit is less confined than shipped: "+join(weak),
			"systemctl cat "+config.WorkerUnit(1)+" shows the drop-in that overrides it; remove it and run systemctl daemon-reload && clusterapp reload")
	}
	return ok(name, fmt.Sprintf("the worker unit keeps its %d key sandboxing settings", len(hardening)))
}
