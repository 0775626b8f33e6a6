package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// config --check says when CLUSTERAPP_MAX_RSS cannot work: at or over the
// hard limit (a warning: the OOM kill comes first), or below what a worker
// holds (an error, as the worker refuses it).
func TestConfigCheckOfMaxRSS(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.env", "CLUSTERAPP_MAX_RSS=512M\nCLUSTERAPP_MEMORY_MAX=768M\n")
	if code, out, stderr := runCLI(t, "config", "--check", ok); code != 0 || strings.Contains(out, "warning") {
		t.Errorf("config --check of 512M under 768M: exit %d\n%s%s", code, out, stderr)
	}
	over := write("over.env", "CLUSTERAPP_MAX_RSS=1G\nCLUSTERAPP_MEMORY_MAX=768M\n")
	code, out, stderr := runCLI(t, "config", "--check", over)
	if want := "CLUSTERAPP_MAX_RSS=1G is not below CLUSTERAPP_MEMORY_MAX=768M: the kernel kills a worker at MemoryMax= (SIGKILL, its requests lost) before it could recycle; set it lower, such as 614M"; code != 0 || !strings.Contains(out+stderr, want) {
		t.Errorf("config --check of 1G over 768M: exit %d, want 0 and %q:\n%s%s", code, want, out, stderr)
	}
	low := write("low.env", "CLUSTERAPP_MAX_RSS=10M\n")
	code, out, stderr = runCLI(t, "config", "--check", low)
	if want := `CLUSTERAPP_MAX_RSS="10M" is invalid`; code != 78 || !strings.Contains(out+stderr, want) {
		t.Errorf("config --check of 10M: exit %d, want 78 and %q:\n%s%s", code, want, out, stderr)
	}
}
