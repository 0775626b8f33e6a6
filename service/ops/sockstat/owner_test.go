package sockstat

import (
	"net"
	"os"
	"testing"
)

func TestUnitOfCgroup(t *testing.T) {
	for text, want := range map[string]string{
		"0::/system.slice/squatter.service\n":                   "squatter.service",
		"0::/system.slice/clusterapp-worker@2.service/worker\n": "clusterapp-worker@2.service",
		"0::/user.slice/user-1000.slice/session-3.scope\n":      "session-3.scope",
		"12:pids:/system.slice/a.service\n0::/init.scope\n":     "init.scope",
		"0::/\n": "",
		"1:name=systemd:/system.slice/old.service\n": "",
	} {
		if got := UnitOfCgroup(text); got != want {
			t.Errorf("UnitOfCgroup(%q) = %q, want %q", text, got, want)
		}
	}
}

// ReadOwners finds this test's own listener by its inode in /proc/net/tcp.
func TestReadOwnersFindsThisProcess(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	all, err := ReadListeners()
	if err != nil {
		t.Fatal(err)
	}
	mine := OnPort(all, uint16(l.Addr().(*net.TCPAddr).Port))
	if len(mine) != 1 {
		t.Fatalf("listeners on our port: %+v", mine)
	}
	owners := ReadOwners([]uint64{mine[0].Inode})[mine[0].Inode]
	if len(owners) != 1 || owners[0].PID != os.Getpid() || owners[0].Comm == "" {
		t.Fatalf("owners of our listener: %+v, want pid %d", owners, os.Getpid())
	}
}
