package units

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/user"
	"sort"
	"strconv"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
)

// Sentinel errors for the preconditions every operator command shares.
var (
	ErrNotRoot = errors.New("must run as root (systemd's private socket /run/systemd/private is root-only)")
	// ErrNoJournalAccess: not root and in none of the journal's groups.
	ErrNoJournalAccess = errors.New("reading the workers' journal needs root or membership of the systemd-journal or adm group (usermod -aG adm USER)")
	ErrNoSystemd       = errors.New("systemd is not running on this machine (no /run/systemd/system)")
	ErrNotInstalled    = errors.New("clusterapp's units are not installed (" + config.SocketUnit + " not found; see README, \"Installing the units\")")
)

// Worker is one worker unit as systemd reports it.
type Worker struct {
	Unit        string `json:"unit"`
	Number      int    `json:"worker"` // N of clusterapp-worker@N.service
	ActiveState string `json:"active_state"`
	SubState    string `json:"sub_state"`
	// Result is the unit's last result ("success", "exit-code", "watchdog", ...).
	Result   string    `json:"result"`
	PID      int       `json:"pid"`
	Started  time.Time `json:"started"` // zero when not running
	Restarts int       `json:"restarts"`
	// MemoryBytes and CPU are nil when systemd has no value (no controller).
	MemoryBytes *uint64        `json:"memory_bytes"`
	CPU         *time.Duration `json:"cpu_ns"`
	StatusText  string         `json:"status_text"`
	// LimitNOFILE is the soft open-file limit the unit asks for.
	LimitNOFILE uint64 `json:"limit_nofile"`
	// Watchdog is the unit's WatchdogSec= (WatchdogUSec), 0 when off.
	Watchdog time.Duration `json:"watchdog_ns"`
	// LastPing is when systemd last heard the worker's watchdog (a ping,
	// or READY=1, which starts the watchdog): WatchdogTimestamp; zero for
	// never. LastPingMono is the same moment on CLOCK_MONOTONIC
	// (WatchdogTimestampMonotonic), which a wall-clock step cannot move.
	LastPing     time.Time     `json:"last_watchdog_ping"`
	LastPingMono time.Duration `json:"-"`
}

// Active reports whether the worker is up (active, or reloading).
func (w Worker) Active() bool { return w.ActiveState == "active" || w.ActiveState == "reloading" }

// SocketState is clusterapp.socket as systemd reports it.
type SocketState struct {
	LoadState   string   `json:"load_state"`
	ActiveState string   `json:"active_state"`
	SubState    string   `json:"sub_state"`
	Listen      []string `json:"listen"` // as systemd prints them, e.g. "[::]:8080"
	Backlog     int      `json:"backlog"`
}

// Preflight checks what every operator command needs before dialing:
// root, and systemd running as the service manager.
func Preflight() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	return SystemdRunning()
}

// SystemdRunning returns ErrNoSystemd unless systemd is the init system.
func SystemdRunning() error {
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return ErrNoSystemd
	}
	return nil
}

// journalGroups are the groups whose members journalctl shows the system
// journal to (systemd-journal on every systemd; adm and wheel through the
// journal files' ACLs on Debian and Fedora).
var journalGroups = []string{"systemd-journal", "adm", "wheel"}

// CanReadJournal returns nil when this process may read the system journal:
// root, or a member of one of journalGroups. journalctl run by anyone else
// shows only that user's own journal, an empty answer that would look like
// workers that log nothing.
func CanReadJournal() error {
	if os.Geteuid() == 0 {
		return nil
	}
	gids, err := os.Getgroups()
	if err != nil {
		return fmt.Errorf("reading the journal: %w", err)
	}
	gids = append(gids, os.Getegid())
	for _, name := range journalGroups {
		g, err := user.LookupGroup(name)
		if err != nil {
			continue // no such group on this system
		}
		for _, gid := range gids {
			if strconv.Itoa(gid) == g.Gid {
				return nil
			}
		}
	}
	return ErrNoJournalAccess
}

// SortWorkers orders workers by number.
func SortWorkers(ws []Worker) {
	sort.Slice(ws, func(i, j int) bool { return ws[i].Number < ws[j].Number })
}

// workerFromProps builds a Worker from a unit's D-Bus properties (the Unit
// and Service interfaces merged). Missing properties leave zero values.
func workerFromProps(unit string, p map[string]any) Worker {
	n, _ := config.WorkerNumber(unit)
	w := Worker{
		Unit: unit, Number: n,
		ActiveState: str(p["ActiveState"]), SubState: str(p["SubState"]), Result: str(p["Result"]),
		PID: int(num(p["MainPID"])), Restarts: int(num(p["NRestarts"])),
		StatusText: str(p["StatusText"]), LimitNOFILE: num(p["LimitNOFILESoft"]),
	}
	if us := num(p["ExecMainStartTimestamp"]); us > 0 && w.PID > 0 {
		w.Started = time.UnixMicro(int64(us))
	}
	w.Watchdog = time.Duration(num(p["WatchdogUSec"])) * time.Microsecond
	if us := num(p["WatchdogTimestamp"]); us > 0 {
		w.LastPing = time.UnixMicro(int64(us))
	}
	w.LastPingMono = time.Duration(num(p["WatchdogTimestampMonotonic"])) * time.Microsecond
	if v, ok := counter(p["MemoryCurrent"]); ok {
		w.MemoryBytes = &v
	}
	if v, ok := counter(p["CPUUsageNSec"]); ok {
		d := time.Duration(v)
		w.CPU = &d
	}
	return w
}

func socketFromProps(p map[string]any) SocketState {
	s := SocketState{
		LoadState: str(p["LoadState"]), ActiveState: str(p["ActiveState"]), SubState: str(p["SubState"]),
		Backlog: int(num(p["Backlog"])),
	}
	// Listen is a(ss): (type, address) pairs.
	if pairs, ok := p["Listen"].([][]any); ok {
		for _, pair := range pairs {
			if len(pair) == 2 {
				s.Listen = append(s.Listen, str(pair[1]))
			}
		}
	}
	return s
}

// counter returns a cgroup accounting value; systemd reports "no value" as
// the maximum of the type (UINT64_MAX).
func counter(v any) (uint64, bool) {
	u, ok := v.(uint64)
	return u, ok && u != math.MaxUint64
}

func str(v any) string { s, _ := v.(string); return s }

// num widens the unsigned integer types godbus decodes into.
func num(v any) uint64 {
	switch n := v.(type) {
	case uint32:
		return uint64(n)
	case uint64:
		return n
	case int32:
		return uint64(max(n, 0))
	case int64:
		return uint64(max(n, 0))
	}
	return 0
}

// WorkerNames returns the unit names of ws, in order.
func WorkerNames(ws []Worker) []string {
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.Unit
	}
	return names
}
