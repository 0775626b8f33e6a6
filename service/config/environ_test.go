package config

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// The limit EnvStringProblem enforces is the kernel's: a program started
// with a KEY=value of MaxArgStrlen-1 bytes runs, one byte more is E2BIG.
func TestEnvStringLimitIsTheKernels(t *testing.T) {
	const key = "CLUSTERAPP_TRUSTED_PROXIES"
	for _, extra := range []int{0, 1} {
		value := strings.Repeat("x", MaxArgStrlen-len(key)-2+extra)
		cmd := exec.Command("/bin/true")
		cmd.Env = []string{key + "=" + value}
		err := cmd.Run()
		problem := EnvStringProblem(key, value)
		if e2big := errors.Is(err, syscall.E2BIG); e2big != (problem != "") {
			t.Errorf("%d bytes of KEY=value: exec %v; EnvStringProblem %q", len(key)+1+len(value), err, problem)
		}
		if extra == 0 && err != nil {
			t.Errorf("exec at the limit: %v", err)
		}
	}
}

func TestEnvSizeProblem(t *testing.T) {
	vars := map[string]string{"A": strings.Repeat("x", 100<<10)}
	if p := EnvSizeProblem(vars); p != "" {
		t.Errorf("100 KiB: %q", p)
	}
	for _, k := range []string{"B", "C", "D", "E", "F", "G", "H", "I", "J", "K", "L", "M", "N", "O", "P", "Q", "R", "S", "T", "U"} {
		vars[k] = strings.Repeat("y", 100<<10)
	}
	if p := EnvSizeProblem(vars); !strings.Contains(p, "the 21 variables set take") || !strings.Contains(p, "ARG_MAX") {
		t.Errorf("2.1 MB: %q", p)
	}
}
