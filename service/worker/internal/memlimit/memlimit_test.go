package memlimit

import (
	"errors"
	"testing"
)

type mapFS map[string]string

func (m mapFS) ReadFile(name string) ([]byte, error) {
	if v, ok := m[name]; ok {
		return []byte(v), nil
	}
	return nil, errors.New("not found")
}

func TestCgroupLimit(t *testing.T) {
	for name, tc := range map[string]struct {
		fs   mapFS
		want int64
	}{
		"v2 max": {mapFS{
			"/proc/self/cgroup": "0::/system.slice/clusterapp-worker@1.service\n",
			"/sys/fs/cgroup/system.slice/clusterapp-worker@1.service/memory.max":  "536870912\n",
			"/sys/fs/cgroup/system.slice/clusterapp-worker@1.service/memory.high": "max\n",
		}, 512 << 20},
		"v2 high below max": {mapFS{
			"/proc/self/cgroup":            "0::/a\n",
			"/sys/fs/cgroup/a/memory.max":  "1073741824\n",
			"/sys/fs/cgroup/a/memory.high": "268435456\n",
		}, 256 << 20},
		"v2 unlimited": {mapFS{
			"/proc/self/cgroup":           "0::/a\n",
			"/sys/fs/cgroup/a/memory.max": "max\n",
		}, 0},
		"hybrid v1 memory": {mapFS{
			"/proc/self/cgroup":                             "4:memory:/x\n0::/x\n",
			"/sys/fs/cgroup/memory/x/memory.limit_in_bytes": "104857600\n",
		}, 100 << 20},
		"v1 unlimited": {mapFS{
			"/proc/self/cgroup":                             "4:cpu,memory:/x\n",
			"/sys/fs/cgroup/memory/x/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := cgroupLimit(tc.fs)
			if err != nil || got != tc.want {
				t.Fatalf("cgroupLimit = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestExplicitGOMEMLIMITWins(t *testing.T) {
	_, ok, err := Derive(func(k string) string {
		if k == "GOMEMLIMIT" {
			return "100MiB"
		}
		return ""
	}, 0.9, 64<<20)
	if ok || err != nil {
		t.Fatalf("Derive with GOMEMLIMIT set: ok=%v err=%v", ok, err)
	}
}

// The soft limit follows the lower of the cgroup's limit and the size the
// worker recycles at (CLUSTERAPP_MAX_RSS), so garbage alone never takes the
// worker to either.
func TestDeriveTakesTheLowerBound(t *testing.T) {
	noEnv := func(string) string { return "" }
	cgroup := mapFS{
		"/proc/self/cgroup":           "0::/a\n",
		"/sys/fs/cgroup/a/memory.max": "1073741824\n",
	}
	for name, tc := range map[string]struct {
		fs        mapFS
		recycleAt int64
		want      int64
		ok        bool
	}{
		"cgroup only":                {cgroup, 0, 1 << 29, true},
		"recycle below the cgroup":   {cgroup, 256 << 20, 128 << 20, true},
		"recycle above the cgroup":   {cgroup, 2 << 30, 1 << 29, true},
		"recycle without a cgroup":   {mapFS{"/proc/self/cgroup": "0::/a\n"}, 256 << 20, 128 << 20, true},
		"neither":                    {mapFS{"/proc/self/cgroup": "0::/a\n"}, 0, 0, false},
		"unreadable cgroup, recycle": {mapFS{}, 256 << 20, 128 << 20, true},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok, _ := derive(tc.fs, noEnv, 0.5, tc.recycleAt)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("derive = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
