package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
)

// runCLI runs the built binary with args and returns its exit status,
// stdout and stderr.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout = &out
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	p := runProc(t, cmd)
	code = p.wait(t, 20*time.Second)
	return code, out.String(), p.stderr.String()
}

// The command line behaves like systemctl's and kubectl's: help on every
// command to stdout with exit 0, the version, flags after arguments, and a
// bad flag or command named with exit 2 and a pointer to --help.
func TestCommandLine(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.env")
	if err := os.WriteFile(bad, []byte("CLUSTERAPP_SHUTDOWN_TIMEOUT=abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A GODEBUG replaces the unit's (config.MonitorTrace): valid, with a
	// warning when it drops the setting.
	godebug, kept := filepath.Join(t.TempDir(), "godebug.env"), filepath.Join(t.TempDir(), "kept.env")
	if err := os.WriteFile(godebug, []byte("GODEBUG=http2server=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kept, []byte("GODEBUG=http2server=0,"+config.MonitorTrace+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A GOMAXPROCS the Go runtime ignores: valid for systemd, a warning
	// naming it (the worker serves with its own Ps and says so too).
	procs, procsOK := filepath.Join(t.TempDir(), "procs.env"), filepath.Join(t.TempDir(), "procs-ok.env")
	if err := os.WriteFile(procs, []byte("GOMAXPROCS=3n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(procsOK, []byte("GOMAXPROCS=3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// "0 means no limit" elsewhere; systemd ignores it ("out of range").
	memZero := filepath.Join(t.TempDir(), "mem-zero.env")
	if err := os.WriteFile(memZero, []byte("CLUSTERAPP_MEMORY_MAX=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// One P per worker with one slot each (a worker per CPU, the default
	// on any machine): valid, and a warning, since it turns shedding off.
	procsOne := filepath.Join(t.TempDir(), "procs-one.env")
	if err := os.WriteFile(procsOne, []byte("GOMAXPROCS=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A GOMEMLIMIT the Go runtime cannot parse: an error (the generator
	// keeps it from the workers, which it would kill before they start).
	memlimit := filepath.Join(t.TempDir(), "memlimit.env")
	if err := os.WriteFile(memlimit, []byte("GOMEMLIMIT=512M\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A value the kernel cannot pass to a program (MAX_ARG_STRLEN):
	// systemd passes it on, and the workers' execve fails with E2BIG.
	huge := filepath.Join(t.TempDir(), "huge.env")
	if err := os.WriteFile(huge, []byte("CLUSTERAPP_ACCESS_LOG=false\nAPP_BLOB="+strings.Repeat("x", 200<<10)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The generator reads scale.env beside the file (clusterapp scale
	// writes it) after the file itself; so does the check.
	scaled := filepath.Join(t.TempDir(), "clusterapp.env")
	if err := os.WriteFile(scaled, []byte("CLUSTERAPP_LISTEN=8080\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config.ScaleFileFor(scaled), []byte("CLUSTERAPP_WORKERS=3\nCLUSTERAPP_LISTEN=0.0.0.0:8080%lo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notify := filepath.Join(t.TempDir(), "notify.env")
	if err := os.WriteFile(notify, []byte("NOTIFY_SOCKET=/run/systemd/notify\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args       []string
		code       int
		stdout     []string // each must appear in stdout
		notStdout  []string
		stderr     []string // each must appear in stderr
		exactOut   string
		emptyOut   bool // stdout must be empty: nothing ran
		emptyError bool // stderr must be empty
	}{
		{args: []string{"--help"}, stdout: []string{"Usage:", "status", "reload", "scale", "logs", "doctor", "config", "--version"}, notStdout: []string{"exited", "docs"}, emptyError: true},
		{args: []string{"-h"}, stdout: []string{"Usage:", "status", "reload"}, notStdout: []string{"exited"}, emptyError: true},
		{args: []string{"help"}, stdout: []string{"Usage:", "status", "reload"}, emptyError: true},
		{args: []string{"help", "status"}, stdout: []string{"clusterapp status [flags]", "--json", "--watch", "Examples:"}, emptyError: true},
		{args: []string{"status", "--help"}, stdout: []string{"clusterapp status [flags]", "--json", "--watch", "print JSON"}, emptyError: true},
		{args: []string{"logs", "-h"}, stdout: []string{"-f, --follow", "--worker N", "--since TIME", "-n, --lines N"}, emptyError: true},
		{args: []string{"reload", "--help"}, stdout: []string{"--max-unavailable", "--timeout"}, emptyError: true},
		{args: []string{"--version"}, exactOut: "clusterapp " + version + "\n", emptyError: true},
		{args: []string{"version"}, exactOut: "clusterapp " + version + "\n", emptyError: true},
		{args: []string{"logs", "--bogus"}, code: exitUsage, stderr: []string{"clusterapp: logs: unknown flag: --bogus", "Run 'clusterapp logs --help' for usage."}},
		{args: []string{"nosuch"}, code: exitUsage, stderr: []string{`clusterapp: unknown command "nosuch"`, "Run 'clusterapp --help' for usage."}},
		{args: []string{"stauts"}, code: exitUsage, stderr: []string{`unknown command "stauts" (did you mean status?)`}},
		{args: []string{"status", "extra"}, code: exitUsage, stderr: []string{`status: unexpected argument "extra"`}},
		{args: []string{"status", "--json", "--watch"}, code: exitUsage, stderr: []string{"--json and --watch do not go together"}},
		// Flags after the positional argument are parsed as flags: the
		// count is checked, and --timeout's value is read (and refused).
		{args: []string{"scale", "0", "--timeout", "10s"}, code: exitUsage, stderr: []string{`scale: "0" is not a worker count`}},
		{args: []string{"scale", "3", "--timeout", "soon"}, code: exitUsage, stderr: []string{`invalid argument "soon" for "--timeout" flag`}},
		// A timeout of 0 or less is refused before anything changes: scale
		// wrote its file and reloaded systemd, then every job failed.
		{args: []string{"scale", "3", "--timeout", "-1s"}, code: exitUsage, emptyOut: true, stderr: []string{"clusterapp: scale: --timeout=-1s: expected a positive duration", "Run 'clusterapp scale --help' for usage."}},
		{args: []string{"scale", "3", "--timeout", "0"}, code: exitUsage, emptyOut: true, stderr: []string{"scale: --timeout=0s: expected a positive duration"}},
		{args: []string{"reload", "--timeout", "0"}, code: exitUsage, emptyOut: true, stderr: []string{"reload: --timeout=0s: expected a positive duration"}},
		{args: []string{"reload", "--max-unavailable", "0"}, code: exitUsage, emptyOut: true, stderr: []string{"reload: --max-unavailable=0: expected a whole number of workers, at least 1"}},
		{args: []string{"logs", "-n", "-1"}, code: exitUsage, emptyOut: true, stderr: []string{"logs: -n/--lines=-1: expected a whole number of lines"}},
		{args: []string{"logs", "--since", "yesterday 3pm"}, code: exitUsage, emptyOut: true, stderr: []string{`logs: --since="yesterday 3pm": expected a time journalctl accepts: -10m, "2h ago", now, today`}},
		{args: []string{"logs", "--since", ""}, code: exitUsage, emptyOut: true, stderr: []string{`logs: --since="": expected a time journalctl accepts`}},
		{args: []string{"logs", "--worker", "0"}, code: exitUsage, emptyOut: true, stderr: []string{"logs: --worker=0: expected a worker number from 1 to 1024"}},
		{args: []string{"logs", "--worker", "1025"}, code: exitUsage, emptyOut: true, stderr: []string{"logs: --worker=1025: expected a worker number from 1 to 1024"}},
		// help names an unknown topic as an unknown command is named.
		{args: []string{"help", "nosuch"}, code: exitUsage, emptyOut: true, stderr: []string{`clusterapp: unknown command "nosuch"`, "Run 'clusterapp --help' for usage."}},
		{args: []string{"help", "stauts"}, code: exitUsage, emptyOut: true, stderr: []string{`unknown command "stauts" (did you mean status?)`}},
		{args: []string{"help", "status", "extra"}, code: exitUsage, emptyOut: true, stderr: []string{`status: unknown command "extra"`, "Run 'clusterapp status --help' for usage."}},
		{args: []string{"generator"}, code: exitUsage, stderr: []string{"generator: expected the output directories systemd passes"}},
		{args: []string{"exited"}, code: exitUsage, stderr: []string{"exited: --instance is required"}},
		{args: []string{"serve", "now"}, code: exitUsage, stderr: []string{`serve: unexpected argument "now"`}},
		// The exit statuses scripts rely on: 78 for a bad file, 1 for a failure.
		{args: []string{"config", "--check", bad}, code: exitConfig, stdout: []string{"CLUSTERAPP_SHUTDOWN_TIMEOUT"}},
		{args: []string{"config", "--check", huge}, code: exitConfig, stdout: []string{huge + ": APP_BLOB is 204800 bytes long", "at most 131071 bytes", "MAX_ARG_STRLEN", "E2BIG"}},
		{args: []string{"config", "--check", godebug}, stdout: []string{`warning: GODEBUG="http2server=0" has no schedtrace`, "add " + config.MonitorTrace, godebug + ": ok (1 variables set)"}},
		{args: []string{"config", "--check", kept}, stdout: []string{kept + ": ok (1 variables set)"}, notStdout: []string{"warning"}},
		{args: []string{"config", "--check", procs}, stdout: []string{"warning: " + procs + `: GOMAXPROCS="3n": expected a whole number from 1`, "its admission slots set its Ps", procs + ": ok (1 variables set)"}},
		{args: []string{"config", "--check", procsOK}, stdout: []string{procsOK + ": ok (1 variables set)"}, notStdout: []string{"warning"}},
		{args: []string{"config", "--check", scaled}, code: exitConfig, stdout: []string{config.ScaleFileFor(scaled) + `: CLUSTERAPP_LISTEN="0.0.0.0:8080%lo" is invalid`}},
		{args: []string{"config", "--check", memZero}, code: exitConfig, stdout: []string{"error: " + memZero + `: CLUSTERAPP_MEMORY_MAX="0" is invalid`, "leave it empty for that", "the units use the default"}},
		{args: []string{"config", "--check", procsOne}, stdout: []string{"warning: " + procsOne + ": GOMAXPROCS=1 is not above the 1 admission slot(s) of a worker", "instead of getting 503", procsOne + ": ok (1 variables set)"}},
		{args: []string{"config", "--check", notify}, code: exitConfig, stdout: []string{"error: " + notify + ": NOTIFY_SOCKET is set by systemd for each worker", "remove the line"}},
		{args: []string{"config", "--check", memlimit}, code: exitConfig, stdout: []string{`error: ` + memlimit + `: GOMEMLIMIT="512M": not a size the Go runtime accepts`, "such as 512MiB", "the workers start without it"}},
		// An empty path is a bad command line, not the default file.
		{args: []string{"config", "--check", ""}, code: exitUsage, emptyOut: true, stderr: []string{"clusterapp: config: --check needs a file path", "Run 'clusterapp config --help' for usage."}},
		{args: []string{"config", "--check="}, code: exitUsage, emptyOut: true, stderr: []string{"config: --check needs a file path"}},
		{args: []string{"config", "--file="}, code: exitUsage, emptyOut: true, stderr: []string{"config: --file needs a file path"}},
		// config's flags are modes: two are refused, naming both, where
		// the first one checked ran and the other was dropped.
		{args: []string{"config", "--check", kept, "--markdown"}, code: exitUsage, emptyOut: true, stderr: []string{"config: --check and --markdown do not go together"}},
		{args: []string{"config", "--markdown", "--env-template"}, code: exitUsage, emptyOut: true, stderr: []string{"config: --env-template and --markdown do not go together"}},
		{args: []string{"config", "--env", "--file", kept}, code: exitUsage, emptyOut: true, stderr: []string{"config: --file and --env do not go together"}},
		{args: []string{"config", "--markdown-invalid", "--markdown"}, code: exitUsage, emptyOut: true, stderr: []string{"config: --markdown and --markdown-invalid do not go together"}},
		{args: []string{"config", "--check", kept, "--file", kept}, code: exitUsage, emptyOut: true, stderr: []string{"config: --check and --file do not go together"}},
		// Each mode alone still runs.
		{args: []string{"config", "--file", kept}, stdout: []string{"VARIABLE", "CLUSTERAPP_LISTEN"}},
		{args: []string{"config", "--env"}, stdout: []string{"VARIABLE", "CLUSTERAPP_LISTEN"}},
		{args: []string{"config", "--markdown"}, stdout: []string{"| `CLUSTERAPP_LISTEN` |"}, emptyError: true},
		{args: []string{"config", "--env-template"}, stdout: []string{"CLUSTERAPP_LISTEN="}, emptyError: true},
		{args: []string{"config", "--check", "/nonexistent.env"}, code: exitFailure, stderr: []string{"clusterapp: config: stat /nonexistent.env: no such file or directory\n"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, unwanted := range tc.notStdout {
				if strings.Contains(stdout, unwanted) {
					t.Errorf("stdout shows %q:\n%s", unwanted, stdout)
				}
			}
			if tc.emptyOut && stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			if tc.exactOut != "" && stdout != tc.exactOut {
				t.Errorf("stdout %q, want %q", stdout, tc.exactOut)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if tc.emptyError && stderr != "" {
				t.Errorf("stderr not empty:\n%s", stderr)
			}
		})
	}
}

// visibleCommands are the subcommands help lists.
func visibleCommands() []string {
	var names []string
	for _, c := range newRootCommand(io.Discard, io.Discard).Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return names
}

// The man page and the completions the packages ship are generated from the
// command tree: the page documents every visible command and no hidden
// one, and the completion scripts ask the binary, which offers every
// visible command.
func TestDocsAndCompletions(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(docsBinary, "docs", dir)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "SOURCE_DATE_EPOCH=1700000000"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("clusterapp docs: %v\n%s", err, out)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	man := read("clusterapp.8")
	if !strings.Contains(man, `.TH "CLUSTERAPP" "8" "2023-11-14"`) {
		t.Errorf("man page heading is not section 8 dated from SOURCE_DATE_EPOCH:\n%.200s", man)
	}
	names := visibleCommands()
	if len(names) < 8 {
		t.Fatalf("only %d visible commands: %v", len(names), names)
	}
	for _, name := range names {
		if !strings.Contains(man, "\n.SS "+name+"\n") {
			t.Errorf("man page has no section for %s", name)
		}
	}
	for _, hidden := range []string{"exited", "docs", "completion"} {
		if strings.Contains(man, ".SS "+hidden) {
			t.Errorf("man page documents the hidden command %s", hidden)
		}
	}
	for _, flag := range []string{"max-unavailable", "watch", "worker", "instance"} {
		if !strings.Contains(man, `\fB--`+flag+`\fP`) {
			t.Errorf("man page lacks --%s", flag)
		}
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		out, err := exec.Command(groff, "-man", "-ww", "-z", filepath.Join(dir, "clusterapp.8")).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff warns about the man page: %v\n%s", err, out)
		}
	}

	for _, script := range []string{"clusterapp.bash", "_clusterapp", "clusterapp.fish"} {
		if s := read(script); !strings.Contains(s, "__complete") || !strings.Contains(s, "clusterapp") {
			t.Errorf("%s does not complete through clusterapp __complete:\n%.300s", script, s)
		}
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		if out, err := exec.Command(bash, "-n", filepath.Join(dir, "clusterapp.bash")).CombinedOutput(); err != nil {
			t.Errorf("bash -n clusterapp.bash: %v\n%s", err, out)
		}
	}
	// What the scripts run when the operator types `clusterapp <TAB>`.
	code, offered, stderr := runCLI(t, "__complete", "")
	if code != 0 {
		t.Fatalf("clusterapp __complete: exit %d\n%s", code, stderr)
	}
	for _, name := range names {
		if !strings.Contains(offered, "\n"+name+"\t") && !strings.HasPrefix(offered, name+"\t") {
			t.Errorf("completion does not offer %s:\n%s", name, offered)
		}
	}
	if strings.Contains(offered, "exited") {
		t.Errorf("completion offers the hidden exited:\n%s", offered)
	}
	// And the flags of a command.
	if _, flags, _ := runCLI(t, "__complete", "reload", "--"); !strings.Contains(flags, "--max-unavailable") {
		t.Errorf("completion of reload's flags lacks --max-unavailable:\n%s", flags)
	}
}

// The shipped binary, which every worker start loads, has no man page
// renderer: go-md2man and blackfriday cost each start ~2 ms of package
// initialisers (docs.go). Its `docs` is an unknown command; the generator's
// build has both.
func TestShippedBinaryLeavesTheManPageRendererOut(t *testing.T) {
	renderers := []string{"github.com/cpuguy83/go-md2man/v2", "github.com/russross/blackfriday/v2"}
	for _, b := range []struct {
		path  string
		links bool
	}{{binary, false}, {docsBinary, true}} {
		info, err := exec.Command("go", "version", "-m", b.path).Output()
		if err != nil {
			t.Fatalf("go version -m %s: %v", b.path, err)
		}
		for _, mod := range renderers {
			if linked := regexp.MustCompile(`(?m)^\s+dep\s+` + regexp.QuoteMeta(mod) + `\s`).Match(info); linked != b.links {
				t.Errorf("%s links %s: %v, want %v", filepath.Base(b.path), mod, linked, b.links)
			}
		}
	}
	code, _, stderr := runCLI(t, "docs", t.TempDir())
	if code != 2 || !strings.Contains(stderr, `unknown command "docs"`) {
		t.Errorf("clusterapp docs: exit %d, want 2 naming the unknown command\n%s", code, stderr)
	}
}
