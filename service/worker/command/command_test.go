package command

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/worker"
)

var program = Program{Name: "prog", Version: "1.2.3", Routes: func(worker.Tools) []worker.Route { return nil }}

// What the command line answers without starting a worker: the version,
// help, and each bad line with its status and a message naming the fault.
func TestMainWithoutServing(t *testing.T) {
	for _, c := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"--version"}, 0, "prog 1.2.3\n", ""},
		{[]string{"-version"}, 0, "prog 1.2.3\n", ""},
		{[]string{"-h"}, 0, "", "usage: prog [serve] [--instance N]"},
		{[]string{"serve", "--help"}, 0, "", "exited --instance N"},
		{[]string{"--workers", "2"}, ExitUsage, "", "prog: flag provided but not defined: -workers\nRun 'prog -h' for usage.\n"},
		{[]string{"serve", "extra"}, ExitUsage, "", `unexpected argument "extra": settings are CLUSTERAPP_* environment variables`},
		{[]string{"--instance", "a b"}, ExitUsage, "", `--instance "a b": expected letters, digits`},
		{[]string{"--instance=" + strings.Repeat("x", 65)}, ExitUsage, "", "at most 64 of them"},
		{[]string{"exited"}, ExitUsage, "", "exited: --instance is required"},
		// Outside the unit systemd has not set $SERVICE_RESULT and $EXIT_CODE.
		{[]string{"exited", "--instance", "1"}, ExitFailure, "", "expected both, as systemd sets them for ExecStopPost="},
		{[]string{"metrics", "--instance", "1"}, ExitUsage, "", "metrics: --instance is a worker's"},
		{[]string{"metrics", "extra"}, ExitUsage, "", `unexpected argument "extra"`},
		// Outside the unit systemd passes no sockets.
		{[]string{"metrics"}, ExitFailure, "", "systemd passed no sockets (LISTEN_FDS is not set)"},
		{[]string{"-h"}, 0, "", "metrics                  serve the pool's metrics"},
	} {
		t.Setenv("SERVICE_RESULT", "")
		t.Setenv("EXIT_CODE", "")
		t.Setenv("LISTEN_FDS", "")
		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), program, c.args, &stdout, &stderr)
		if code != c.code || stdout.String() != c.stdout || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q",
				c.args, code, stdout.String(), stderr.String(), c.code, c.stdout, c.stderr)
		}
	}
}

// A worker.ConfigError is 78 (EX_CONFIG), said once: not again when the
// worker logged it; any other error is 1, on one line.
func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		err    error
		code   int
		stderr string
	}{
		{nil, 0, ""},
		{&worker.ConfigError{Err: errString("CLUSTERAPP_X is invalid"), Logged: true}, ExitConfig, ""},
		{&worker.ConfigError{Err: errString("CLUSTERAPP_X is invalid")}, ExitConfig, "prog: CLUSTERAPP_X is invalid\n"},
		{worker.ErrCrashed, ExitFailure, "prog: crashed on request (/debug/crash)\n"},
	} {
		var stderr bytes.Buffer
		if code := program.exitCode(c.err, &stderr); code != c.code || stderr.String() != c.stderr {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", c.err, code, stderr.String(), c.code, c.stderr)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
