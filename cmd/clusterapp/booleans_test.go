package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// One file, read alike by `clusterapp config --check`, `clusterapp config`
// and the worker: a boolean written as systemd writes it (yes, off, 1) is
// valid to all three, and a bad one is refused with what is accepted.
func TestBooleansAsSystemdWritesThem(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.env"), filepath.Join(dir, "bad.env")
	if err := os.WriteFile(good, []byte("CLUSTERAPP_ACCESS_LOG=Yes\nCLUSTERAPP_DEBUG_ENDPOINTS=off\nCLUSTERAPP_BALANCE=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("CLUSTERAPP_DEBUG_ENDPOINTS=maybe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := runCLI(t, "config", "--check", good); code != 0 || !strings.Contains(out, "ok (3 variables set)") {
		t.Errorf("config --check of Yes, off, 1: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ := runCLI(t, "config", "--file", good)
	for _, want := range []string{`true (set as "Yes")`, `false (set as "off")`, `true (set as "1")`} {
		if code != 0 || !strings.Contains(out, want) || strings.Contains(out, "invalid") {
			t.Errorf("config of Yes, off, 1: exit %d, want %q and nothing invalid:\n%s", code, want, out)
		}
	}
	// Values valid before systemd's words were read, written other than
	// their effective form: `config` called them invalid.
	other := filepath.Join(dir, "other.env")
	if err := os.WriteFile(other, []byte("CLUSTERAPP_DEBUG_ENDPOINTS=1\nCLUSTERAPP_MAX_BODY_BYTES=65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCLI(t, "config", "--file", other); code != 0 || strings.Contains(out, "invalid") || !strings.Contains(out, `64KiB (set as "65536")`) {
		t.Errorf("config of 1 and 65536: exit %d, want them shown as valid:\n%s", code, out)
	}
	code, out, _ = runCLI(t, "config", "--check", bad)
	if want := `CLUSTERAPP_DEBUG_ENDPOINTS="maybe" is invalid: expected a boolean: 1, yes, y, true, t or on; 0, no, n, false, f or off (in any case, as systemd reads them)`; code != 78 || !strings.Contains(out, want) {
		t.Errorf("config --check of maybe: exit %d, want 78 and %q:\n%s", code, want, out)
	}

	sock, n := newSharedSocket(t), newNotifySocket(t)
	w := startWorker(t, &sock, n, "CLUSTERAPP_ACCESS_LOG=Yes", "CLUSTERAPP_DEBUG_ENDPOINTS=off", "CLUSTERAPP_BALANCE=1")
	n.waitFor(t, "READY=1", 10*time.Second)
	if resp, body := get(t, "http://"+sock.addr+"/debug/crash"); resp.StatusCode != 404 {
		t.Fatalf("/debug/crash with CLUSTERAPP_DEBUG_ENDPOINTS=off: %d %s, want 404", resp.StatusCode, body)
	}
	waitLog(t, w, "path=/debug/crash", 10*time.Second) // the access log is on: Yes
	stop(t, w)
}
