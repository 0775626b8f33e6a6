package systemd_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// `clusterapp config` shows what the files give (the env file, then the
// scale file), never the shell's environment, and names the running
// workers started with other settings until a reload applies them.
func TestConfigShowsFilesAndRunningWorkers(t *testing.T) {
	b := sandbox.New(t, sandbox.Options{Env: "CLUSTERAPP_WORKERS=2\n"})
	b.Start(2)
	b.Must("clusterapp", "scale", "3")
	b.WriteEnv("CLUSTERAPP_WORKERS=2\nCLUSTERAPP_FIB_MAX_N=35\n")

	out := b.Must("env", "CLUSTERAPP_FIB_MAX_N=12", "clusterapp", "config")
	if !regexp.MustCompile(`(?m)^CLUSTERAPP_WORKERS\s+0\s+3\s`).MatchString(out) {
		t.Errorf("config does not show the scaled count 3:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^CLUSTERAPP_FIB_MAX_N\s+\S+\s+35\s`).MatchString(out) {
		t.Errorf("config does not show the file's CLUSTERAPP_FIB_MAX_N=35 (the shell said 12):\n%s", out)
	}
	for _, n := range []string{"1", "2", "3"} {
		if !strings.Contains(out, "worker "+n+" (pid ") || !strings.Contains(out, `CLUSTERAPP_FIB_MAX_N="" (files: "35")`) {
			t.Errorf("config does not say worker %s runs without the new setting:\n%s", n, out)
		}
	}
	b.Must("clusterapp", "reload")
	if out := b.Must("clusterapp", "config"); strings.Contains(out, "runs with") {
		t.Errorf("after the reload a worker still runs with other settings:\n%s", out)
	}
}
