package generator

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
	"github.com/clusterapp/clusterapp/service/config/envfile"
	"github.com/clusterapp/clusterapp/service/worker/admission"
)

func write(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "clusterapp.env")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// generate runs the generator on env and returns the files it wrote and
// what it logged, one line each.
func generate(t *testing.T, env string, cpus int) (map[string]string, string) {
	t.Helper()
	dir := t.TempDir()
	var stderr bytes.Buffer
	logf := func(prefix string) func(string) {
		return func(s string) { stderr.WriteString(prefix + s + "\n") }
	}
	if err := Run(env, dir, cpus, logf("warning: "), logf("note: ")); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
		}
		return nil
	})
	return out, stderr.String()
}

func TestOneWorkerPerCPUByDefault(t *testing.T) {
	files, stderr := generate(t, filepath.Join(t.TempDir(), "missing.env"), 4)
	if stderr != "" {
		t.Fatalf("a missing file is not a problem: %q", stderr)
	}
	got := files["clusterapp.target.d/50-workers.conf"]
	if strings.Count(got, "Wants=clusterapp-worker@") != 4 || !strings.Contains(got, "Wants=clusterapp-worker@4.service\n") {
		t.Fatalf("target drop-in:\n%s", got)
	}
	if _, ok := files["clusterapp.socket.d/50-env.conf"]; ok {
		t.Fatal("socket drop-in written although the file sets nothing for it")
	}
	if _, ok := files["clusterapp-worker@1.service.d/50-first.conf"]; ok {
		t.Fatal("worker 1 waits for itself")
	}
	for i := 2; i <= 4; i++ {
		want := "[Unit]\nWants=clusterapp-first.target\nAfter=clusterapp-first.target\n"
		if got := files[fmt.Sprintf("clusterapp-worker@%d.service.d/50-first.conf", i)]; !strings.HasSuffix(got, want) {
			t.Fatalf("worker %d does not start after worker 1:\n%s", i, got)
		}
	}
	for unit, content := range files {
		if strings.Contains(content, "Before=") {
			t.Errorf("%s orders units (Before=): a worker 1 that cannot start would hold up the others' restarts:\n%s", unit, content)
		}
	}
	svc := files["clusterapp-worker@.service.d/50-env.conf"]
	for _, want := range []string{"WatchdogSec=10000ms", "TimeoutStopSec=30000ms", "LimitNOFILE=65536", "MemoryMax=infinity", `Environment="CLUSTERAPP_MAX_IN_FLIGHT=1"`} {
		if !strings.Contains(svc, want+"\n") {
			t.Errorf("worker drop-in lacks %s:\n%s", want, svc)
		}
	}
}

func TestEnvFileDrivesUnits(t *testing.T) {
	env := write(t, "CLUSTERAPP_WORKERS=3\nCLUSTERAPP_LISTEN=127.0.0.1:9090\nCLUSTERAPP_BACKLOG=1024\nCLUSTERAPP_WATCHDOG_SEC=2s\nCLUSTERAPP_SHUTDOWN_TIMEOUT=5s\nCLUSTERAPP_MEMORY_MAX=512M\n")
	files, stderr := generate(t, env, 2)
	if stderr != "" {
		t.Fatal(stderr)
	}
	if got := files["clusterapp.target.d/50-workers.conf"]; strings.Count(got, "Wants=") != 3 {
		t.Fatalf("target drop-in:\n%s", got)
	}
	if got := files["clusterapp.socket.d/50-env.conf"]; !strings.Contains(got, "ListenStream=\nListenStream=127.0.0.1:9090\nBacklog=1024\n") {
		t.Fatalf("socket drop-in:\n%s", got)
	}
	svc := files["clusterapp-worker@.service.d/50-env.conf"]
	for _, want := range []string{"WatchdogSec=2000ms", "TimeoutStopSec=15000ms", "MemoryMax=512M", `Environment="CLUSTERAPP_MAX_IN_FLIGHT=1"`} {
		if !strings.Contains(svc, want+"\n") {
			t.Errorf("worker drop-in lacks %s:\n%s", want, svc)
		}
	}
}

// One bad value costs the operator that value alone, never the rest of
// the file (issue 11: a bad WORKERS used to drop the whole file).
func TestInvalidValueFallsBackAlone(t *testing.T) {
	env := write(t, "CLUSTERAPP_WORKERS=many\nCLUSTERAPP_LISTEN=127.0.0.1:29000\nCLUSTERAPP_WATCHDOG_SEC=3s\n")
	files, stderr := generate(t, env, 2)
	if !strings.Contains(stderr, `CLUSTERAPP_WORKERS="many" is invalid`) || !strings.Contains(stderr, "the units use the default, 0") {
		t.Fatalf("stderr %q", stderr)
	}
	if got := files["clusterapp.target.d/50-workers.conf"]; strings.Count(got, "Wants=") != 2 {
		t.Fatalf("target drop-in:\n%s", got)
	}
	if got := files["clusterapp.socket.d/50-env.conf"]; !strings.Contains(got, "ListenStream=127.0.0.1:29000\n") {
		t.Fatalf("the listen address was lost with the bad WORKERS:\n%s", got)
	}
	if got := files["clusterapp-worker@.service.d/50-env.conf"]; !strings.Contains(got, "WatchdogSec=3000ms\n") {
		t.Fatalf("the watchdog was lost with the bad WORKERS:\n%s", got)
	}
}

// The reproduction of issue 11: an `export` line systemd skips moved the
// socket to all addresses and started one worker per CPU.
func TestExportLineIsSkippedNotFatal(t *testing.T) {
	env := write(t, "CLUSTERAPP_LISTEN=127.0.0.1:29000\nCLUSTERAPP_WORKERS=1\nexport GODEBUG=madvdontneed=1\n")
	files, stderr := generate(t, env, 2)
	if !strings.Contains(stderr, "note: "+env+": line 3: systemd skips this line: `export` is shell syntax") || strings.Contains(stderr, "warning:") {
		t.Fatalf("stderr %q", stderr)
	}
	if got := files["clusterapp.socket.d/50-env.conf"]; !strings.Contains(got, "ListenStream=\nListenStream=127.0.0.1:29000\n") {
		t.Fatalf("socket drop-in:\n%s", got)
	}
	if got := files["clusterapp.target.d/50-workers.conf"]; strings.Count(got, "Wants=") != 1 {
		t.Fatalf("target drop-in:\n%s", got)
	}
	for unit := range files {
		if strings.HasSuffix(unit, "50-first.conf") {
			t.Fatalf("one worker waits for another: %s", unit)
		}
	}
}

// The listen address fails closed: an invalid one, or a file systemd
// refuses as a whole, resets ListenStream= so the socket listens nowhere;
// it never falls back to the shipped address (all addresses).
func TestListenFailsClosed(t *testing.T) {
	for name, body := range map[string]string{
		"host name":         "CLUSTERAPP_LISTEN=localhost:29000\n",
		"Go zone":           "CLUSTERAPP_LISTEN=[::1%lo]:29000\n",
		"specifier":         "CLUSTERAPP_LISTEN=%H:29000\n",
		"missing interface": "CLUSTERAPP_LISTEN=[fe80::1]:29000%nosuchif0\n",
		"file with a NUL":   "CLUSTERAPP_LISTEN=127.0.0.1:29000\nX=\x00\n",
		"invalid UTF-8":     "CLUSTERAPP_LISTEN=127.0.0.1:29000\nX=\xff\n",
		"carriage return":   "CLUSTERAPP_LISTEN=\"29001\rExecStartPre=/bin/sh -c 'id > /tmp/x'\rListenStream=127.0.0.1:29000\"\n",
	} {
		files, stderr := generate(t, write(t, body), 2)
		sock := files["clusterapp.socket.d/50-env.conf"]
		if directives(sock)["ListenStream"] != "" || strings.Count(sock, "ListenStream") != 1 || !strings.Contains(sock, "# clusterapp.socket must not listen") {
			t.Errorf("%s: socket drop-in:\n%s", name, sock)
		}
		if !strings.Contains(stderr, "clusterapp.socket will not listen anywhere until it is fixed") {
			t.Errorf("%s: stderr %q", name, stderr)
		}
	}
}

// CLUSTERAPP_METRICS_LISTEN moves clusterapp-metrics.socket; an invalid one
// makes that socket listen nowhere and leaves the service socket alone.
func TestMetricsListen(t *testing.T) {
	files, _ := generate(t, write(t, "CLUSTERAPP_METRICS_LISTEN=[::1]:9300\n"), 2)
	if got := directives(files["clusterapp-metrics.socket.d/50-env.conf"])["ListenStream"]; got != "[::1]:9300" {
		t.Errorf("metrics socket ListenStream = %q, want [::1]:9300", got)
	}
	if _, ok := files["clusterapp.socket.d/50-env.conf"]; ok {
		t.Error("the service socket got a drop-in for a metrics setting")
	}
	for name, body := range map[string]string{
		"host name":             "CLUSTERAPP_METRICS_LISTEN=localhost:9180\n",
		"the service's address": "CLUSTERAPP_LISTEN=127.0.0.1:9180\nCLUSTERAPP_METRICS_LISTEN=127.0.0.1:9180\n",
	} {
		files, stderr := generate(t, write(t, body), 2)
		sock := files["clusterapp-metrics.socket.d/50-env.conf"]
		if directives(sock)["ListenStream"] != "" || strings.Count(sock, "ListenStream") != 1 {
			t.Errorf("%s: metrics socket drop-in:\n%s", name, sock)
		}
		if !strings.Contains(stderr, "clusterapp-metrics.socket will not listen anywhere until it is fixed") || strings.Contains(stderr, "clusterapp.socket will not listen") {
			t.Errorf("%s: stderr %q", name, stderr)
		}
	}
}

// The scale file (what `clusterapp scale` writes) is read after the
// operator's file, as the units' second EnvironmentFile=: its value wins, and
// a problem in it names it.
func TestScaleFileAfterEnvFile(t *testing.T) {
	env := write(t, "CLUSTERAPP_WORKERS=2\nCLUSTERAPP_BACKLOG=100\n")
	if err := os.WriteFile(config.ScaleFileFor(env), []byte("CLUSTERAPP_WORKERS=5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, stderr := generate(t, env, 2)
	if !strings.Contains(stderr, "CLUSTERAPP_WORKERS=\"5\" overrides \"2\" from "+env) {
		t.Errorf("the override is not noted: %q", stderr)
	}
	if n := strings.Count(files["clusterapp.target.d/50-workers.conf"], "Wants="); n != 5 {
		t.Errorf("%d workers wanted, want 5 from the scale file:\n%s", n, files["clusterapp.target.d/50-workers.conf"])
	}
	if got := directives(files["clusterapp.socket.d/50-env.conf"])["Backlog"]; got != "100" {
		t.Errorf("Backlog = %q, want the env file's 100", got)
	}
	if err := os.WriteFile(config.ScaleFileFor(env), []byte("CLUSTERAPP_WORKERS=many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr = generate(t, env, 2)
	if !strings.Contains(stderr, config.ScaleFileFor(env)+": CLUSTERAPP_WORKERS") {
		t.Errorf("a bad value in the scale file is not blamed on it: %q", stderr)
	}
}

// directives returns the last value of each directive in a unit file.
func directives(unit string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(unit, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

func TestAdmissionShareOfCPUs(t *testing.T) {
	env := write(t, "CLUSTERAPP_WORKERS=4\n")
	files, _ := generate(t, env, 16)
	if svc := files["clusterapp-worker@.service.d/50-env.conf"]; !strings.Contains(svc, "Environment=\"CLUSTERAPP_MAX_IN_FLIGHT=4\"\n") {
		t.Fatalf("16 CPUs over 4 workers must admit 4 each:\n%s", svc)
	}
}

// A GOMEMLIMIT the Go runtime cannot parse (512M is systemd's spelling,
// not Go's) is named and kept out of the workers' environment, as the exact
// assignment; a valid one, or none, leaves the environment alone.
func TestInvalidGOMEMLIMITUnset(t *testing.T) {
	for body, want := range map[string]string{
		"GOMEMLIMIT=512M\n":      `UnsetEnvironment="GOMEMLIMIT=512M"`,
		"GOMEMLIMIT=\"5%MiB\"\n": `UnsetEnvironment="GOMEMLIMIT=5%%MiB"`,
		"GOMEMLIMIT=512MiB\n":    "",
		"GOMEMLIMIT=off\n":       "",
		"GOMEMLIMIT=\n":          "",
		"":                       "",
	} {
		files, stderr := generate(t, write(t, body), 2)
		svc := files["clusterapp-worker@.service.d/50-env.conf"]
		if want == "" {
			if strings.Contains(svc, "UnsetEnvironment") || strings.Contains(stderr, "GOMEMLIMIT") {
				t.Errorf("%q: a valid or absent GOMEMLIMIT was touched:\n%s\n%s", body, svc, stderr)
			}
			continue
		}
		if !strings.Contains(svc, want+"\n") {
			t.Errorf("%q: the worker drop-in lacks %s:\n%s", body, want, svc)
		}
		if !strings.Contains(stderr, "GOMEMLIMIT=") || !strings.Contains(stderr, "such as 512MiB") {
			t.Errorf("%q: the warning does not name GOMEMLIMIT and what is expected: %q", body, stderr)
		}
		verify(t, files, false)
	}
}

// A GOGC or GOMAXPROCS the runtime ignores is a warning naming it; a
// valid one is not.
func TestIgnoredGOGCNamed(t *testing.T) {
	if _, stderr := generate(t, write(t, "GOGC=50%\n"), 2); !strings.Contains(stderr, `GOGC="50%": the Go runtime ignores it`) {
		t.Errorf("GOGC=50%%: %q", stderr)
	}
	if _, stderr := generate(t, write(t, "GOGC=200\n"), 2); strings.Contains(stderr, "GOGC") {
		t.Errorf("GOGC=200: %q", stderr)
	}
	if _, stderr := generate(t, write(t, "GOMAXPROCS=3n\n"), 2); !strings.Contains(stderr, `GOMAXPROCS="3n": expected a whole number from 1`) {
		t.Errorf("GOMAXPROCS=3n: %q", stderr)
	}
}

// A variable systemd sets for each worker (an env file copied from a
// shell under systemd) is an error naming it: the file's value would
// replace systemd's.
func TestVariablesSystemdSetsAreRefused(t *testing.T) {
	for _, k := range config.SystemdSets {
		_, stderr := generate(t, write(t, "CLUSTERAPP_WORKERS=2\n"+k+"=5\n"), 2)
		if !strings.Contains(stderr, k+" is set by systemd for each worker") || !strings.Contains(stderr, "remove the line") {
			t.Errorf("%s=5: %q", k, stderr)
		}
	}
	if _, stderr := generate(t, write(t, "CLUSTERAPP_WORKERS=2\nLANG=C.UTF-8\n"), 2); strings.Contains(stderr, "set by systemd") {
		t.Errorf("LANG: %q", stderr)
	}
}

// injections are values an attacker or a careless operator could put in the
// environment file, for every variable the generator writes into a unit.
var injections = []string{
	`"29001\rExecStartPre=/bin/sh -c 'id > /tmp/x'\rListenStream=127.0.0.1:29000"`,
	`"8080\nExecStartPre=/bin/touch /tmp/pwned"`,
	`8080\` + "\n" + `ExecStartPre=/bin/touch /tmp/pwned`,
	`%n`,
	`%H:8080`,
	`"512M\\"`,
	`'1 2'`,
	`"\"quoted\""`,
	`1%%`,
	`"10s\\nExecStart=/bin/false"`,
	`infinity\`,
	`" 10s"`,
	"8080\x00ExecStartPre=/bin/true",
}

// firstDropIn matches the drop-in of each worker 2..N, which allowed names
// by worker 2's.
var firstDropIn = regexp.MustCompile(`^clusterapp-worker@[0-9]+\.(service\.d/50-first\.conf)$`)

// allowed are the directives each generated file may hold.
var allowed = map[string]map[string]bool{
	"clusterapp.target.d/50-workers.conf":         {"Wants": true},
	"clusterapp-worker@2.service.d/50-first.conf": {"Wants": true, "After": true},
	"clusterapp.socket.d/50-env.conf":             {"ListenStream": true, "Backlog": true},
	"clusterapp-worker@.service.d/50-env.conf":    {"Environment": true, "WatchdogSec": true, "TimeoutStopSec": true, "LimitNOFILE": true, "MemoryHigh": true, "MemoryMax": true, "UnsetEnvironment": true},
}

// Nothing in the environment file adds a directive to a unit, and a
// rejected value is named (issue 11, point 3). The generated files also
// pass systemd-analyze verify with the shipped units.
func TestInjectionCorpus(t *testing.T) {
	for _, name := range []string{"LISTEN", "BACKLOG", "WORKERS", "WATCHDOG_SEC", "LIMIT_NOFILE", "MEMORY_HIGH", "MEMORY_MAX", "SHUTDOWN_TIMEOUT", config.GOMEMLIMIT} {
		key := "CLUSTERAPP_" + name
		if name == config.GOMEMLIMIT {
			key = name
		}
		for _, payload := range injections {
			body := key + "=" + payload + "\n"
			files, stderr := generate(t, write(t, body), 2)
			for rel, unit := range files {
				for _, line := range strings.Split(strings.TrimSuffix(unit, "\n"), "\n") {
					k, _, isDirective := strings.Cut(line, "=")
					switch {
					case strings.HasPrefix(line, "# "), line == "[Unit]", line == "[Socket]", line == "[Service]":
					case !isDirective || !allowed[firstDropIn.ReplaceAllString(rel, "clusterapp-worker@2.$1")][k]:
						t.Errorf("%s: %s holds %q", strings.TrimSpace(body), rel, line)
					}
				}
			}
			// Some payloads read back as valid (a trailing backslash joins the
			// next line, as systemd does); the others must be named.
			f, perr := envfile.Parse([]byte(body))
			var cerr error
			if perr == nil {
				_, cerr = config.LoadVars(f.Vars())
			}
			switch {
			case perr != nil && !strings.Contains(stderr, "line 1: a NUL byte"):
				t.Errorf("%q: the refusal does not name the line: %q", body, stderr)
			case perr == nil && cerr != nil && !strings.Contains(stderr, key+"="):
				t.Errorf("%s: the rejection does not name %s: %q", strings.TrimSpace(body), key, stderr)
			}
			verify(t, files, strings.HasPrefix(name, "LISTEN") || perr != nil)
		}
	}
}

// Valid settings, written with escapes where systemd needs them, pass
// systemd-analyze verify.
func TestGeneratedUnitsVerify(t *testing.T) {
	for _, body := range []string{
		"",
		"CLUSTERAPP_LISTEN=8080\nCLUSTERAPP_BACKLOG=128\n",
		"CLUSTERAPP_LISTEN=[::1]:8080\n",
		"CLUSTERAPP_LISTEN=[fe80::1]:8080%lo\nCLUSTERAPP_WORKERS=3\n",
		"CLUSTERAPP_MEMORY_HIGH=40%\nCLUSTERAPP_MEMORY_MAX=90%\nCLUSTERAPP_WATCHDOG_SEC=1h\nCLUSTERAPP_SHUTDOWN_TIMEOUT=1h\n",
	} {
		files, stderr := generate(t, write(t, body), 4)
		if strings.Contains(stderr, "warning:") {
			t.Errorf("%q: %s", body, stderr)
		}
		if strings.Contains(body, "%lo") && !strings.Contains(files["clusterapp.socket.d/50-env.conf"], "ListenStream=[fe80::1]:8080%%lo\n") {
			t.Errorf("the zone's %% is not escaped:\n%s", files["clusterapp.socket.d/50-env.conf"])
		}
		verify(t, files, false)
	}
}

// verify runs systemd-analyze verify on the shipped units with files as
// drop-ins. When listenRefused, the socket must be refused for having no
// Listen setting (the generator's fail-closed drop-in) and nothing else.
func verify(t *testing.T, files map[string]string, listenRefused bool) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	for _, unit := range []string{"clusterapp.socket", "clusterapp.target", "clusterapp-first.target", "clusterapp-worker@.service"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "systemd", unit))
		if err != nil {
			t.Fatal(err)
		}
		// verify checks that ExecStart= exists and is executable.
		b = bytes.ReplaceAll(b, []byte("/usr/bin/clusterapp"), []byte("/bin/true"))
		b = bytes.ReplaceAll(b, []byte(config.WorkerBinary), []byte("/bin/true"))
		if err := os.WriteFile(filepath.Join(dir, unit), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("systemd-analyze", "verify", filepath.Join(dir, "clusterapp.socket"), filepath.Join(dir, "clusterapp.target"), filepath.Join(dir, "clusterapp-first.target"), filepath.Join(dir, "clusterapp-worker@.service"), filepath.Join(dir, "clusterapp-worker@2.service"))
	cmd.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":", "SYSTEMD_LOG_LEVEL=warning")
	out, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(out))
	if listenRefused {
		if err == nil || !strings.Contains(text, "clusterapp.socket: Unit has no Listen setting") {
			t.Errorf("the fail-closed socket was not refused by systemd-analyze verify: %v\n%s", err, text)
		}
		return
	}
	if err != nil || text != "" {
		t.Errorf("systemd-analyze verify: %v\n%s\nfiles: %v", err, text, files)
	}
}

// An empty GOMAXPROCS= reaches the workers (systemd passes it) and the
// runtime ignores it: a note, like any other value it ignores.
func TestEmptyGOMAXPROCSNamed(t *testing.T) {
	if _, stderr := generate(t, write(t, "GOMAXPROCS=\n"), 2); !strings.Contains(stderr, `GOMAXPROCS="": expected a whole number from 1`) {
		t.Errorf("GOMAXPROCS=: %q", stderr)
	}
}

// A valid GOMAXPROCS not above a worker's admission slots turns spike
// protection off (config.ProcsAtMostSlots). The note agrees with the
// worker's own rule (admission.PlanProcs, fed what the worker would read:
// the generator's CLUSTERAPP_MAX_IN_FLIGHT unless the file sets one, 0
// meaning GOMAXPROCS), so it is said at daemon-reload exactly when the
// worker will warn.
func TestGOMAXPROCSNotAboveSlotsNamed(t *testing.T) {
	const cpus = 2
	for _, env := range []string{
		"GOMAXPROCS=1\n", // 2 workers: 1 slot each
		"GOMAXPROCS=2\n",
		"CLUSTERAPP_WORKERS=1\nGOMAXPROCS=2\n", // 2 slots
		"CLUSTERAPP_WORKERS=1\nGOMAXPROCS=3\n",
		"CLUSTERAPP_WORKERS=4\nGOMAXPROCS=1\n", // 1 slot (at least 1)
		"GOMAXPROCS=4\nCLUSTERAPP_MAX_IN_FLIGHT=4\n",
		"GOMAXPROCS=4\nCLUSTERAPP_MAX_IN_FLIGHT=3\n",
		"GOMAXPROCS=4\nCLUSTERAPP_MAX_IN_FLIGHT=0\n", // the worker's default: GOMAXPROCS
		"GOMAXPROCS=+2\nCLUSTERAPP_WORKERS=1\n",
		"GOMAXPROCS=3n\n", // ignored by the runtime: another note
		"CLUSTERAPP_WORKERS=1\n",
	} {
		s := Read(write(t, env))
		files, err := s.Files(cpus)
		if err != nil {
			t.Fatal(err)
		}
		slots := 0
		if m := regexp.MustCompile(`Environment="?CLUSTERAPP_MAX_IN_FLIGHT=(\d+)`).FindStringSubmatch(files[config.WorkerTemplate+".d/50-env.conf"]); m != nil {
			slots, _ = strconv.Atoi(m[1])
		}
		if s.sets("MAX_IN_FLIGHT") {
			slots = s.Config.MaxInFlight
		}
		v, set := s.Set[config.GOMAXPROCS]
		procs, _ := strconv.ParseInt(v, 10, 32)
		if slots == 0 {
			slots = int(procs)
		}
		warns := set && config.GOMAXPROCSApplies(v) && admission.PlanProcs(int(procs), slots, true).TooFew
		note := s.ProcsNote(cpus)
		if (note != "") != warns {
			t.Errorf("%q: the worker warns: %v; the generator's note: %q", env, warns, note)
		}
		_, stderr := generate(t, write(t, env), cpus)
		if warns != strings.Contains(stderr, "admission slot(s) of a worker") {
			t.Errorf("%q: the worker warns: %v; the generator said: %q", env, warns, stderr)
		}
	}
}

// A FIFO at the file's path is refused at once, as an unreadable file is
// (the socket fails closed); reading it waited for a writer forever.
func TestReadRefusesAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "clusterapp.env")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan Settings, 1)
	go func() { done <- Read(fifo) }()
	select {
	case s := <-done:
		if !strings.Contains(s.ListenRefused, "a FIFO, not a regular file") {
			t.Errorf("ListenRefused = %q, want it to name the FIFO", s.ListenRefused)
		}
	case <-time.After(30 * time.Second): // a hang, not a timing: the read returns at once
		t.Fatal("Read of a FIFO did not return")
	}
}

// A value the kernel cannot pass to the workers (over MAX_ARG_STRLEN, or
// all of them over ARG_MAX) is a problem naming the variable and the limit:
// systemd passes it on, and every worker's execve fails with E2BIG.
func TestEnvironmentOverTheKernelsLimitsNamed(t *testing.T) {
	key := "CLUSTERAPP_TRUSTED_PROXIES"
	fits := strings.Repeat("1", config.MaxArgStrlen-len(key)-2) // KEY=value and its NUL: exactly the limit
	s := Read(write(t, key+"="+fits+"\n"))
	for _, p := range s.Problems {
		if strings.Contains(p, "E2BIG") {
			t.Errorf("a value that fits: %.200s", p)
		}
	}
	s = Read(write(t, key+"="+fits+"1\n"))
	if !hasProblem(s.Problems, key+" is 131045 bytes long: one variable's KEY=value may take at most 131071 bytes", "MAX_ARG_STRLEN", "E2BIG") {
		t.Errorf("one byte over: %.300q", s.Problems)
	}
	var many strings.Builder
	for i := range 21 {
		fmt.Fprintf(&many, "BIG_%02d=%s\n", i, strings.Repeat("x", 100<<10))
	}
	s = Read(write(t, many.String()))
	if !hasProblem(s.Problems, "the 21 variables set take 2150736 bytes of environment", "over 2097152 bytes", "ARG_MAX", "E2BIG") {
		t.Errorf("over ARG_MAX together: %.300q", s.Problems)
	}
}

// hasProblem reports whether one of problems contains every one of parts.
func hasProblem(problems []string, parts ...string) bool {
	for _, p := range problems {
		all := true
		for _, part := range parts {
			all = all && strings.Contains(p, part)
		}
		if all {
			return true
		}
	}
	return false
}

// The generator reads a file's booleans as the workers do (systemd's words,
// config.ParseBool): no problem for yes or off, and Invalid names only a
// value that is not one, so `clusterapp config` does not call 1 invalid.
func TestBooleansReadAsTheWorkersReadThem(t *testing.T) {
	s := Read(write(t, "CLUSTERAPP_BALANCE=off\nCLUSTERAPP_ACCESS_LOG=Yes\nCLUSTERAPP_DEBUG_ENDPOINTS=1\nCLUSTERAPP_MAX_BODY_BYTES=65536\n"))
	if len(s.Problems) != 0 || len(s.Invalid) != 0 || s.Config.Balance || !s.Config.AccessLog || !s.Config.DebugEndpoints {
		t.Fatalf("off, Yes, 1: problems %q, invalid %v, balance %v, access log %v, debug endpoints %v; want no problem, false, true, true",
			s.Problems, s.Invalid, s.Config.Balance, s.Config.AccessLog, s.Config.DebugEndpoints)
	}
	s = Read(write(t, "CLUSTERAPP_ACCESS_LOG=maybe\nCLUSTERAPP_DEBUG_ENDPOINTS=on\n"))
	if len(s.Problems) != 1 || !strings.Contains(s.Problems[0], "expected a boolean: 1, yes, y, true, t or on; 0, no, n, false, f or off") ||
		!s.Invalid["CLUSTERAPP_ACCESS_LOG"] || s.Invalid["CLUSTERAPP_DEBUG_ENDPOINTS"] || !s.Config.DebugEndpoints {
		t.Fatalf("maybe, on: problems %q, invalid %v; want CLUSTERAPP_ACCESS_LOG alone invalid, listing what is accepted", s.Problems, s.Invalid)
	}
}
