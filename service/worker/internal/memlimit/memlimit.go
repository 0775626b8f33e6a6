// Package memlimit derives the Go runtime's soft memory limit (GOMEMLIMIT)
// from the worker's cgroup memory limit.
//
// systemd enforces MemoryMax= (and throttles at MemoryHigh=) on the unit's
// cgroup. A Go program unaware of it lets garbage accumulate until the kernel
// OOM-kills it; with a soft limit a little below, the GC works harder as the
// heap approaches the limit instead. An explicit GOMEMLIMIT always wins.
//
// cgroup v2 is read from /proc/self/cgroup's "0::" line and the unified
// hierarchy (memory.high, memory.max); on hybrid hosts, the v1 memory
// controller's memory.limit_in_bytes is read as a fallback.
package memlimit

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// fsys is the seam to /proc and /sys.
type fsys interface {
	ReadFile(name string) ([]byte, error)
}

type osFS struct{}

func (osFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// v1Unlimited is what cgroup v1 reports for "no limit" (rounded to pages).
const v1Unlimited = math.MaxInt64 &^ 4095

// CgroupLimit returns the smallest memory limit on this process's cgroup, or
// 0 when there is none.
func CgroupLimit() (int64, error) { return cgroupLimit(osFS{}) }

func cgroupLimit(f fsys) (int64, error) {
	data, err := f.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	var best int64
	consider := func(path string) {
		b, err := f.ReadFile(path)
		if err != nil {
			return // no such file: no limit at this level
		}
		v := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(v, 10, 64)
		if v == "max" || err != nil || n <= 0 || n >= v1Unlimited {
			return
		}
		if best == 0 || n < best {
			best = n
		}
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
				consider(filepath.Join(root, parts[2], "memory.max"))
				consider(filepath.Join(root, parts[2], "memory.high"))
			}
		case hasController(parts[1], "memory"):
			consider(filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"))
		}
	}
	return best, nil
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// Derive returns the soft limit to set: ratio of the cgroup limit, or of
// recycleAt when it is lower (the resident size at which the worker
// recycles itself, CLUSTERAPP_MAX_RSS; 0 for none), so the collector keeps
// garbage under it. ok is false when GOMEMLIMIT is set or there is neither
// limit. err is a cgroup that cannot be read; the limit from recycleAt is
// still returned with it.
func Derive(getenv func(string) string, ratio float64, recycleAt int64) (limit int64, ok bool, err error) {
	return derive(osFS{}, getenv, ratio, recycleAt)
}

func derive(f fsys, getenv func(string) string, ratio float64, recycleAt int64) (int64, bool, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false, nil
	}
	bound, err := cgroupLimit(f)
	if recycleAt > 0 && (bound == 0 || recycleAt < bound) {
		bound = recycleAt
	}
	if bound == 0 {
		return 0, false, err
	}
	return int64(float64(bound) * ratio), true, err
}
