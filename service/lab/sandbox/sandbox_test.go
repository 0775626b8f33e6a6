package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterapp/clusterapp/service/config"
)

// fake records the scripts/sandbox commands a Driver runs and answers them
// with answer (nil: empty output, success).
type fake struct {
	calls  []string
	answer func(args []string) ([]byte, error)
}

func (f *fake) driver() *Driver {
	return &Driver{Name: "t", Src: "/src", Command: func(ctx context.Context, args ...string) ([]byte, error) {
		f.calls = append(f.calls, strings.Join(args, " "))
		if f.answer == nil {
			return nil, nil
		}
		return f.answer(args)
	}}
}

func TestUpWritesTheEnvFileBeforeInstalling(t *testing.T) {
	var env string
	f := &fake{answer: func(args []string) ([]byte, error) {
		if args[0] == "cp" && args[3] == config.EnvFile {
			b, err := os.ReadFile(args[2])
			env = string(b)
			return nil, err
		}
		return nil, nil
	}}
	if err := f.driver().Up(context.Background(), Options{Env: "CLUSTERAPP_WORKERS=2\n"}); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 4 || f.calls[0] != "up t" || !strings.HasSuffix(f.calls[1], " "+config.EnvFile) ||
		f.calls[2] != "install t" || f.calls[3] != "cp t /src/bin/clusterapp-load "+LoadPath {
		t.Errorf("Up ran %q, want up, the env file, install, the generator", f.calls)
	}
	if env != "CLUSTERAPP_WORKERS=2\n" {
		t.Errorf("env file %q", env)
	}

	f = &fake{}
	if err := f.driver().Up(context.Background(), Options{Bare: true}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(f.calls, "install t") || len(f.calls) != 2 {
		t.Errorf("a bare Up ran %q, want up and the generator only", f.calls)
	}
}

func TestExecErrorCarriesTheOutput(t *testing.T) {
	exit := exec.Command("false").Run()
	f := &fake{answer: func([]string) ([]byte, error) { return []byte("inactive\n"), exit }}
	out, err := f.driver().Exec(context.Background(), time.Second, "systemctl", "is-active", "x")
	var ce *CommandError
	if !errors.As(err, &ce) || out != "inactive\n" || !errors.Is(err, exit) {
		t.Fatalf("Exec = %q, %v; want the output and a *CommandError wrapping the exit", out, err)
	}
	if msg := err.Error(); msg != "sandbox exec t -- systemctl is-active x: exit status 1\ninactive" {
		t.Errorf("error %q", msg)
	}
	if got := commandErr(err); got != exit {
		t.Errorf("commandErr = %v, want the command's own error", got)
	}
}

func TestLoadRunsTheGeneratorAndParsesItsResult(t *testing.T) {
	f := &fake{answer: func([]string) ([]byte, error) { return []byte(`{"requests":5,"ok":5}` + "\n"), nil }}
	res, err := f.driver().Load(context.Background(), URL+"/", LoadOptions{CPUs: "1", Nice: -10, Budget: time.Second}, "-n", "5")
	if err != nil || res.OK != 5 {
		t.Fatalf("Load = %+v, %v", res, err)
	}
	if want := "exec t -- taskset -c 1 nice -n -10 " + LoadPath + " -json -url http://127.0.0.1:8080/ -n 5"; f.calls[0] != want {
		t.Errorf("Load ran %q, want %q", f.calls[0], want)
	}

	f = &fake{answer: func([]string) ([]byte, error) { return []byte("\n"), nil }}
	if _, err := f.driver().Load(context.Background(), URL+"/", LoadOptions{}); err == nil || !strings.Contains(err.Error(), "load http://127.0.0.1:8080/: ") {
		t.Errorf("Load of an empty output: %v, want an error naming the URL", err)
	}
	if f.calls[0] != "exec t -- "+LoadPath+" -json -url http://127.0.0.1:8080/" {
		t.Errorf("Load with no options ran %q", f.calls[0])
	}
}

func TestWaitReadyWantsExactlyTheWorkers(t *testing.T) {
	listing := config.WorkerUnit(1) + " loaded active running\n"
	f := &fake{answer: func(args []string) ([]byte, error) {
		switch {
		case slices.Contains(args, "list-units"):
			return []byte(listing), nil
		case slices.Contains(args, "curl"):
			return []byte("200 1"), nil
		}
		return nil, nil
	}}
	d := f.driver()
	err := d.WaitReady(context.Background(), 2, 300*time.Millisecond)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "want 2 workers") || !strings.Contains(err.Error(), config.WorkerUnit(1)) {
		t.Errorf("err = %v, want ErrNotReady naming the 2 workers wanted and the one active", err)
	}
	listing += config.WorkerUnit(2) + " loaded active running\n"
	if err := d.WaitReady(context.Background(), 2, time.Second); err != nil {
		t.Errorf("both workers active: %v", err)
	}
	if err := d.WaitReady(context.Background(), 1, 300*time.Millisecond); !errors.Is(err, ErrNotReady) {
		t.Errorf("a worker too many: %v, want ErrNotReady", err)
	}
}

func TestStartNeedsTheFirstRequestServed(t *testing.T) {
	f := &fake{answer: func(args []string) ([]byte, error) {
		if slices.Contains(args, "curl") {
			return []byte("503 "), nil
		}
		return nil, nil
	}}
	err := f.driver().Start(context.Background(), 1)
	if err == nil || !strings.Contains(err.Error(), `got "503", want 200`) {
		t.Errorf("Start = %v, want the 503 named", err)
	}
	if want := "exec t -- systemctl start " + config.SocketUnit + " " + config.MetricsSocketUnit; f.calls[0] != want {
		t.Errorf("Start ran %q first, want %q", f.calls[0], want)
	}
}

func TestActiveWorkersAndHostPID(t *testing.T) {
	f := &fake{answer: func(args []string) ([]byte, error) {
		if args[0] == "list" {
			return []byte("other 12 private\nt 345 private\n"), nil
		}
		return []byte(unitLines(1, 2)), nil
	}}
	d := f.driver()
	units, err := d.ActiveWorkers(context.Background())
	if err != nil || !slices.Equal(units, WorkerUnits(2)) {
		t.Errorf("ActiveWorkers = %q, %v; want %q", units, err, WorkerUnits(2))
	}
	if pid, err := d.HostPID(context.Background()); pid != 345 || err != nil {
		t.Errorf("HostPID = %d, %v; want 345", pid, err)
	}
	d.Name = "gone"
	if _, err := d.HostPID(context.Background()); err == nil || !strings.Contains(err.Error(), "box gone is not up") {
		t.Errorf("HostPID of a box not up: %v", err)
	}
}

func unitLines(from, to int) string {
	var b strings.Builder
	for n := from; n <= to; n++ {
		fmt.Fprintf(&b, "%s loaded active running\n", config.WorkerUnit(n))
	}
	return b.String()
}

// fakeT records what a Box does to its test.
type fakeT struct {
	testing.TB
	fatal string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic(f)
}

// A Box turns the Driver's errors into a failed test.
func TestBoxFailsTheTestOnError(t *testing.T) {
	f := &fake{answer: func([]string) ([]byte, error) { return []byte("no such unit\n"), errors.New("exit status 1") }}
	ft := &fakeT{}
	b := &Box{Driver: f.driver(), t: ft}
	func() {
		defer func() {
			if r := recover(); r != ft {
				panic(r)
			}
		}()
		b.Must("systemctl", "cat", "x")
	}()
	if !strings.Contains(ft.fatal, "systemctl cat x: exit status 1\nno such unit") {
		t.Errorf("Must failed the test with %q", ft.fatal)
	}
	out, err := b.Run("systemctl", "cat", "x")
	if out != "no such unit\n" || err == nil || err.Error() != "exit status 1" {
		t.Errorf("Run = %q, %v; want the output and the command's own error", out, err)
	}
}

// `systemctl is-active a b c` exits 0 when any one is active: every line
// must say active.
func TestAllActiveReadsEveryUnit(t *testing.T) {
	for _, tc := range []struct {
		out  string
		n    int
		want bool
	}{
		{"active\nactive\nactive\n", 3, true},
		{"active\nactivating\nactive\n", 3, false},
		{"active\ninactive\n", 2, false},
		{"active\n", 2, false},
		{"Warning: something on stderr\nactive\nactive\n", 2, true},
		{"", 1, false},
		{"", 0, false},
	} {
		if got := allActive(tc.out, tc.n); got != tc.want {
			t.Errorf("allActive(%q, %d) = %v, want %v", tc.out, tc.n, got, tc.want)
		}
	}
}
