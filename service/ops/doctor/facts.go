package doctor

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/config/generator"
	"github.com/clusterapp/clusterapp/service/ops/liveness"
	"github.com/clusterapp/clusterapp/service/ops/sockstat"
	"github.com/clusterapp/clusterapp/service/ops/units"
)

// Facts is everything the checks look at.
type Facts struct {
	EnvFile     string
	ConfigError string // the env file's problem, if any (defaults then apply)
	Configured  int    // workers the env file asks for
	Wanted      []string
	Workers     []units.Worker
	Socket      units.SocketState
	Listeners   []sockstat.Listener // LISTEN sockets on the socket's ports
	// PortOwners are the processes holding Listeners, by inode, read only
	// while the socket is not active: a listener on its port is then
	// another program's, and the reason it cannot listen.
	PortOwners map[uint64][]sockstat.Process
	// AllListeners are every TCP LISTEN socket of this network namespace.
	AllListeners []sockstat.Listener
	Somaxconn    int
	PortRange    [2]int
	// Reserved is net.ipv4.ip_local_reserved_ports as ranges [lo, hi].
	Reserved [][2]int
	// OpenFiles maps a worker PID to its soft open-file limit.
	OpenFiles         map[int]int
	ManagerHardNOFILE uint64 // PID 1's hard open-file limit
	Counters          sockstat.ListenCounters
	WorkerProps       map[string]any // clusterapp-worker@1.service
	// ProcStates maps a worker PID to its /proc/PID/stat state letter.
	ProcStates map[int]byte
	// Now is CLOCK_MONOTONIC when the facts were gathered, the clock of
	// the workers' last watchdog pings; 0 when unread.
	Now time.Duration
}

// Systemd is what Gather asks systemd; *units.Client implements it.
type Systemd interface {
	Socket(ctx context.Context) (units.SocketState, error)
	Workers(ctx context.Context) ([]units.Worker, error)
	Wanted(ctx context.Context) ([]string, error)
	Properties(ctx context.Context, unit string) (map[string]any, error)
}

// Gather collects Facts from systemd, /proc and the env file.
func Gather(ctx context.Context, sd Systemd, envFile string) (Facts, error) {
	f := Facts{EnvFile: envFile, OpenFiles: map[int]int{}, ProcStates: map[int]byte{}}
	settings := generator.Read(envFile, config.ScaleFileFor(envFile))
	f.ConfigError = strings.Join(settings.Problems, "; ")
	f.Configured = settings.Workers(runtime.NumCPU())
	var err error
	if f.Socket, err = sd.Socket(ctx); err != nil {
		return f, err
	}
	if f.Wanted, err = sd.Wanted(ctx); err != nil {
		return f, err
	}
	if f.Workers, err = sd.Workers(ctx); err != nil {
		return f, err
	}
	if f.WorkerProps, err = sd.Properties(ctx, config.WorkerUnit(1)); err != nil {
		return f, err
	}
	all, err := sockstat.ReadListeners()
	if err != nil {
		return f, err
	}
	f.AllListeners = all
	f.Listeners = OnPorts(all, f.Socket.Listen)
	if f.Socket.ActiveState != "active" && len(f.Listeners) > 0 {
		inodes := make([]uint64, len(f.Listeners))
		for i, l := range f.Listeners {
			inodes[i] = l.Inode
		}
		f.PortOwners = sockstat.ReadOwners(inodes)
	}
	if f.Counters, err = sockstat.ReadListenCounters(); err != nil {
		return f, err
	}
	if f.Somaxconn, err = readInt("/proc/sys/net/core/somaxconn"); err != nil {
		return f, err
	}
	if f.PortRange, err = readPortRange(); err != nil {
		return f, err
	}
	if f.Reserved, err = readReservedPorts(); err != nil {
		return f, err
	}
	for _, w := range f.Workers {
		if w.PID > 0 {
			if soft, _, err := OpenFileLimit(w.PID); err == nil {
				f.OpenFiles[w.PID] = int(soft)
			}
			if state, err := liveness.ProcState(w.PID); err == nil {
				f.ProcStates[w.PID] = state
			}
		}
	}
	// Read after the workers, so no ping systemd reported is newer than it.
	f.Now, _ = liveness.Now() // unread: the pings' age is not judged
	if _, hard, err := OpenFileLimit(1); err == nil {
		f.ManagerHardNOFILE = hard
	}
	return f, nil
}

// OnPorts keeps the listeners on the ports of systemd's Listen= addresses
// ("[::]:8080", "0.0.0.0:80", "8080"). Matching by port, not by inode,
// keeps it to /proc/net; another program cannot hold the same port while
// the socket is up, unless it uses SO_REUSEPORT.
func OnPorts(ls []sockstat.Listener, listen []string) []sockstat.Listener {
	var out []sockstat.Listener
	for _, addr := range listen {
		i := strings.LastIndex(addr, ":")
		port, err := strconv.ParseUint(addr[i+1:], 10, 16)
		if err != nil {
			continue // a unix socket path or a netlink family
		}
		out = append(out, sockstat.OnPort(ls, uint16(port))...)
	}
	return out
}

// OpenFileLimit reads "Max open files" from /proc/PID/limits: the limit in
// effect, which systemd show does not tell when it could not apply it.
func OpenFileLimit(pid int) (soft, hard uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("open-file limit of pid %d: %w", pid, err)
	}
	return ParseOpenFileLimit(string(b))
}

// ParseOpenFileLimit reads the "Max open files  SOFT  HARD  files" line;
// "unlimited" is returned as the maximum uint64.
func ParseOpenFileLimit(limits string) (soft, hard uint64, err error) {
	for _, line := range strings.Split(limits, "\n") {
		rest, found := strings.CutPrefix(line, "Max open files")
		if f := strings.Fields(rest); found && len(f) >= 2 {
			soft, err1 := parseLimit(f[0])
			hard, err2 := parseLimit(f[1])
			if err1 == nil && err2 == nil {
				return soft, hard, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("no \"Max open files\" line")
}

func parseLimit(s string) (uint64, error) {
	if s == "unlimited" {
		return ^uint64(0), nil
	}
	return strconv.ParseUint(s, 10, 64)
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read sysctl: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return n, nil
}

func readPortRange() ([2]int, error) {
	const path = "/proc/sys/net/ipv4/ip_local_port_range"
	b, err := os.ReadFile(path)
	if err != nil {
		return [2]int{}, fmt.Errorf("read sysctl: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return [2]int{}, fmt.Errorf("parse %s: %q", path, b)
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return [2]int{}, fmt.Errorf("parse %s: %q", path, b)
	}
	return [2]int{lo, hi}, nil
}

// readReservedPorts reads net.ipv4.ip_local_reserved_ports: "" (none), or
// ports and ranges separated by commas, e.g. "8080,9180,30000-30010".
func readReservedPorts() ([][2]int, error) {
	const path = "/proc/sys/net/ipv4/ip_local_reserved_ports"
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read sysctl: %w", err)
	}
	r, err := ParsePortList(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return r, nil
}

// ParsePortList parses a list of ports and ranges as the kernel prints
// ip_local_reserved_ports.
func ParsePortList(s string) ([][2]int, error) {
	var out [][2]int
	if s == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("%q: %w", item, err)
			}
		}
		out = append(out, [2]int{a, b})
	}
	return out, nil
}
