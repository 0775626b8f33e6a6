package systemd_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// listenCorpus holds CLUSTERAPP_LISTEN values, each on a port of its own.
// onPurpose lists forms systemd takes that clusterapp refuses, with why:
// the test checks that systemd does take them, so the list stays true.
var (
	listenCorpus = []string{
		"29101", "127.0.0.1:29102", "0.0.0.0:29103", "[::1]:29104", "[::]:29105",
		"[fe80::1]:29106%lo", "[::ffff:127.0.0.1]:29107", "127.0.0.2:29108", "[fe80::1]:29109%1",
		"localhost:29110", "%H:29111", "[::1%lo]:29112", ":29113", "0", "65536", "127.0.0.1",
		"127.0.0.1:029115", "::1:29116", "[127.0.0.1]:29117", "29119%lo", "[::1]:29120%nosuchif0",
		"1.2.3:29121", "01.2.3.4:29122", "127.0.0.1:29123:1", "[::1]29124", "[::1]:", "127.0.0.1:-1",
		"127.0.0.1:29125%lo", "029126", "/run/la.sock", "@clusterapp-la", "+29127", " 29128",
	}
	onPurpose = map[string]string{
		"127.0.0.1:29125%lo": "systemd ignores an interface on an IPv4 address; clusterapp says so instead",
		"/run/la.sock":       "clusterapp serves TCP only",
		"@clusterapp-la":     "clusterapp serves TCP only",
		"+29127":             "a sign is not part of a port",
		" 29128":             "the unit file parser trims the space; clusterapp refuses whitespace in every variable",
	}
)

// CLUSTERAPP_LISTEN against ListenStream= in the real systemd: every
// address clusterapp accepts, written the way the generator writes it, makes
// a socket unit that starts and listens; every TCP form systemd takes,
// clusterapp takes too, apart from the few it refuses on purpose.
func TestListenAddressAgreesWithSystemd(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Bare: true})
	b.WriteFile("/etc/systemd/system/la.service", "[Service]\nExecStart=/bin/true\n")
	for i, addr := range listenCorpus {
		escaped := strings.ReplaceAll(addr, "%", "%%") // what package unitfile writes
		if l, err := config.ParseListen(addr); err == nil {
			escaped = strings.ReplaceAll(l.String(), "%", "%%")
		}
		b.WriteFile(fmt.Sprintf("/etc/systemd/system/la%d.socket", i),
			"[Socket]\nListenStream="+escaped+"\nFreeBind=yes\nService=la.service\n")
	}
	b.Must("systemctl", "daemon-reload")
	for i, addr := range listenCorpus {
		unit := fmt.Sprintf("la%d.socket", i)
		_, startErr := b.Run("systemctl", "start", unit)
		listen := b.Show(unit, "Listen")
		systemdTakes := startErr == nil && listen != ""
		l, err := config.ParseListen(addr)
		if err == nil {
			err = l.CheckInterface()
		}
		ours := err == nil
		why, purpose := onPurpose[addr]
		switch {
		case ours && !systemdTakes:
			t.Errorf("%q: clusterapp accepts it, systemd does not (start: %v, Listen=%q)", addr, startErr, listen)
		case !ours && systemdTakes && !purpose:
			t.Errorf("%q: systemd listens on %q, clusterapp refuses it: %v", addr, listen, err)
		case purpose && !systemdTakes:
			t.Errorf("%q is listed as refused on purpose (%s), but systemd refuses it too: drop it from the list", addr, why)
		case ours:
			t.Logf("%-28q -> ListenStream=%s, systemd listens on %s", addr, l, listen)
		}
		b.Run("systemctl", "stop", unit)
	}
}
