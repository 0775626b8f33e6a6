package sockstat

import (
	"net/netip"
	"testing"
)

// Shaped like a box's files: clusterapp.socket on [::]:8080 with 3
// connections waiting (tx_queue is 0 for listeners), a loopback listener.
const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000003 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
`

const tcp4 = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1053 1 00000000efda63d7 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 2001 1 00000000efda63d7 20 4 30 10 -1
`

func TestParseTCP(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want Listener
	}{
		{"ipv6 any", tcp6, Listener{Addr: netip.MustParseAddrPort("[::]:8080"), Queued: 3, Inode: 31337}},
		{"ipv4 loopback", tcp4, Listener{Addr: netip.MustParseAddrPort("127.0.0.1:8080"), Queued: 0, Inode: 1053}},
	} {
		ls, err := ParseTCP(tc.text)
		if err != nil || len(ls) != 1 || ls[0] != tc.want {
			t.Errorf("%s: got %+v, %v; want only %+v (established sockets skipped)", tc.name, ls, err, tc.want)
		}
	}
}

func TestParseTCPMalformed(t *testing.T) {
	_, err := ParseTCP("header\n 0: 0100007F:1F90 00000000:0000 0A zz 0 0 0 0 1 x\n")
	if err == nil {
		t.Fatal("malformed LISTEN line accepted")
	}
}

func TestOnPort(t *testing.T) {
	ls, _ := ParseTCP(tcp4)
	if got := OnPort(ls, 8080); len(got) != 1 {
		t.Errorf("OnPort(8080) = %v", got)
	}
	if got := OnPort(ls, 9090); len(got) != 0 {
		t.Errorf("OnPort(9090) = %v", got)
	}
}

const netstat = `TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPTimeouts
TcpExt: 0 17 19 3
IpExt: InNoRoutes InTruncatedPkts
IpExt: 0 0
`

func TestParseNetstat(t *testing.T) {
	m, err := ParseNetstat(netstat, "TcpExt")
	if err != nil || m["ListenOverflows"] != 17 || m["ListenDrops"] != 19 || m["TCPTimeouts"] != 3 {
		t.Fatalf("got %v, %v", m, err)
	}
	if _, err := ParseNetstat(netstat, "MPTcpExt"); err == nil {
		t.Error("missing section not reported")
	}
	if _, err := ParseNetstat("TcpExt: A B\nTcpExt: 1\n", "TcpExt"); err == nil {
		t.Error("name/value count mismatch not reported")
	}
}

func TestReadRealProc(t *testing.T) {
	if _, err := ReadListeners(); err != nil {
		t.Fatalf("ReadListeners: %v", err)
	}
	if _, err := ReadListenCounters(); err != nil {
		t.Fatalf("ReadListenCounters: %v", err)
	}
}
