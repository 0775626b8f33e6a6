package sockstat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process is a process that holds a socket open.
type Process struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"` // /proc/PID/comm: the program's name
	Unit string `json:"unit"` // the systemd unit of its cgroup; "" when none
}

// String is "python3 (pid 812, squatter.service)".
func (p Process) String() string {
	if p.Unit == "" {
		return fmt.Sprintf("%s (pid %d)", p.Comm, p.PID)
	}
	return fmt.Sprintf("%s (pid %d, %s)", p.Comm, p.PID, p.Unit)
}

// ReadOwners returns the processes holding each of the sockets with the
// given inodes (Listener.Inode), found the way ss -p and fuser find them:
// a link /proc/PID/fd/N reading "socket:[INODE]". Only root sees every
// process's descriptors; a process it cannot read is skipped, so a missing
// inode means "not found", not "nobody".
func ReadOwners(inodes []uint64) map[uint64][]Process {
	want := map[string]uint64{}
	for _, ino := range inodes {
		want["socket:["+strconv.FormatUint(ino, 10)+"]"] = ino
	}
	out := map[uint64][]Process{}
	pids, _ := filepath.Glob("/proc/[0-9]*") // a fixed pattern: never ErrBadPattern
	for _, dir := range pids {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(dir, "fd"))
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
			if ino, ok := want[link]; ok && err == nil {
				out[ino] = append(out[ino], readProcess(pid))
				break // one entry per process, however many descriptors it holds
			}
		}
	}
	return out
}

func readProcess(pid int) Process {
	p := Process{PID: pid}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
		p.Comm = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil {
		p.Unit = UnitOfCgroup(string(b))
	}
	return p
}

// UnitOfCgroup returns the systemd unit in the text of /proc/PID/cgroup:
// the last service or scope in the unified hierarchy's path
// ("0::/system.slice/squatter.service" gives squatter.service), or "".
func UnitOfCgroup(text string) string {
	for _, line := range strings.Split(text, "\n") {
		path, ok := strings.CutPrefix(line, "0::")
		if !ok {
			continue
		}
		parts := strings.Split(path, "/")
		for i := len(parts) - 1; i >= 0; i-- {
			if strings.HasSuffix(parts[i], ".service") || strings.HasSuffix(parts[i], ".scope") {
				return parts[i]
			}
		}
	}
	return ""
}
