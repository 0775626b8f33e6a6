package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/config/unitfile"
)

// Bare net/http under the worker unit's own hardening: the stack
// comparison's third side. Bare as a plain transient unit pays nothing for
// the worker unit's sandbox (its seccomp filters on every system call, its
// namespaces, a socket passed by systemd), so a ratio against it puts the
// unit's price on the handler stack. Bare in a unit derived from the
// shipped one pays the same, and the two ratios tell the stack's price and
// the unit's apart.
const (
	// BareUnit is the derived service, BareSocketUnit its socket.
	BareUnit       = "clusterapp-bench-bare.service"
	BareSocketUnit = "clusterapp-bench-bare.socket"
	// bareUnitPort is the derived socket's port inside the box.
	bareUnitPort = 18094
	// bareUnitDir is where the derived units go inside the box.
	bareUnitDir = "/etc/systemd/system"
)

// notCarried are the worker unit's [Service] settings the derived unit
// leaves out: what starts, supervises and feeds the worker (bare sends no
// READY=1 and no watchdog pings, reads no environment file and needs no
// runtime directory; a second unit sharing the pool's would own it too).
// Every other line, the whole sandbox and the GODEBUG, is carried over.
var notCarried = map[string]bool{
	"Type": true, "NotifyAccess": true, "ExecStart": true, "ExecStopPost": true, "EnvironmentFile": true,
	"Sockets": true, "WatchdogSec": true, "Restart": true, "RestartSec": true, "TimeoutStartSec": true,
	"RuntimeDirectory": true, "RuntimeDirectoryPreserve": true,
}

// BareUnits derives the bare anchor's service and socket units from the
// repository's worker unit and listening socket (systemd/ under repo):
// bin is where bare is installed in the box. The socket keeps every
// [Socket] setting of the shipped one but its address and service; the
// service keeps every [Service] setting of the worker's but notCarried.
// What it sets itself goes through package unitfile, escaped; the carried
// lines are unit text already and are copied as they are.
func BareUnits(repo, bin string) (service, socket string, err error) {
	worker, err := unitSections(filepath.Join(repo, "systemd", config.WorkerTemplate))
	if err != nil {
		return "", "", err
	}
	sock, err := unitSections(filepath.Join(repo, "systemd", config.SocketUnit))
	if err != nil {
		return "", "", err
	}
	if len(worker["Service"]) == 0 || len(sock["Socket"]) == 0 {
		return "", "", fmt.Errorf("bare's units: %s or %s has no settings", config.WorkerTemplate, config.SocketUnit)
	}
	service, err = withCarried(unitfile.New("").Section("Unit").
		Set("Description", "bare net/http under the worker unit's hardening (benchmark)").
		Set("Requires", BareSocketUnit).Set("After", BareSocketUnit).
		Section("Service").Set("Type", "simple").Set("ExecStart", bin).Set("Sockets", BareSocketUnit),
		worker["Service"], notCarried)
	if err != nil {
		return "", "", err
	}
	socket, err = withCarried(unitfile.New("").Section("Unit").Set("Description", "bare net/http's socket (benchmark)").
		Section("Socket").Set("ListenStream", fmt.Sprintf("127.0.0.1:%d", bareUnitPort)).Set("Service", BareUnit),
		sock["Socket"], map[string]bool{"ListenStream": true, "Service": true})
	return service, socket, err
}

// withCarried is f's text followed by the settings not in skip, as they
// were written in the unit they come from.
func withCarried(f *unitfile.File, settings [][2]string, skip map[string]bool) (string, error) {
	head, err := f.String()
	if err != nil {
		return "", fmt.Errorf("bare's units: %w", err)
	}
	var b strings.Builder
	b.WriteString(head)
	for _, kv := range settings {
		if !skip[kv[0]] {
			fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
		}
	}
	return b.String(), nil
}

// unitSections reads a unit file's settings by section, in order, as
// key-value pairs (comments and blank lines dropped). A line continued
// with a backslash is an error, not misread: the shipped units have none.
func unitSections(path string) (map[string][][2]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bare's units: %w", err)
	}
	defer f.Close()
	sections := map[string][][2]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		case strings.HasSuffix(line, `\`):
			return nil, fmt.Errorf("bare's units: %s continues a line (%q): not read here", path, line)
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return nil, fmt.Errorf("bare's units: %s: %q is not a setting", path, line)
			}
			sections[section] = append(sections[section], [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bare's units: %s: %w", path, err)
	}
	return sections, nil
}
