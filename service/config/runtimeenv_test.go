package config

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

func TestGOMAXPROCSApplies(t *testing.T) {
	for v, want := range map[string]bool{
		"1": true, "3": true, "03": true, "+3": true, "64": true, "2147483647": true,
		"": false, "0": false, "-1": false, "3n": false, " 3": false, "3 ": false,
		"2147483648": false, "99999999999": false, "0x10": false, "3.0": false, "1_0": false,
	} {
		if got := GOMAXPROCSApplies(v); got != want {
			t.Errorf("GOMAXPROCSApplies(%q) = %v, want %v", v, got, want)
		}
	}
}

// printProcsEnv makes the test binary print runtime.GOMAXPROCS(0) and exit
// (TestMain), so the runtime itself says what it made of a value.
const printProcsEnv = "CLUSTERAPP_TEST_PRINT_GOMAXPROCS"

func TestMain(m *testing.M) {
	if os.Getenv(printProcsEnv) != "" {
		fmt.Println(runtime.GOMAXPROCS(0), debug.SetGCPercent(100))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Differential: for each value, the Go runtime started with it applies it
// exactly when GOMAXPROCSApplies says so. The number used is none the
// runtime would pick by itself here.
func TestGOMAXPROCSAppliesAgreesWithTheRuntime(t *testing.T) {
	n := runtime.NumCPU() + 3
	s := strconv.Itoa(n)
	for _, v := range []string{s, "0" + s, "00" + s, "+" + s, "-" + s, s + "n", " " + s, s + " ", s + ".0", "0", "", "2147483648", "0x" + s, "1_" + s} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), printProcsEnv+"=1", "GOMAXPROCS="+v)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOMAXPROCS=%q: %v", v, err)
		}
		applied := strings.Fields(string(out))[0] == s
		if got := GOMAXPROCSApplies(v); got != applied {
			t.Errorf("GOMAXPROCS=%q: the runtime ran %s Ps (applied: %v), GOMAXPROCSApplies says %v", v, strings.TrimSpace(string(out)), applied, got)
		}
	}
}

func TestGOMEMLIMITApplies(t *testing.T) {
	for v, want := range map[string]bool{
		"off": true, "0": true, "512MiB": true, "2GiB": true, "1073741824": true, "100B": true, "1KiB": true, "8TiB": true, "+5MiB": true,
		"512M": false, "2G": false, "1.5GiB": false, "abc": false, "-1": false, "MiB": false, "5iB": false, "5PiB": false,
		"OFF": false, "5 MiB": false, "99999999TiB": false, "5mib": false, "B": false,
	} {
		if got := GOMEMLIMITApplies(v); got != want {
			t.Errorf("GOMEMLIMITApplies(%q) = %v, want %v", v, got, want)
		}
	}
}

// Differential: the Go runtime started with each value survives exactly
// when GOMEMLIMITApplies says so (it dies with "malformed GOMEMLIMIT"
// otherwise).
func TestGOMEMLIMITAgreesWithTheRuntime(t *testing.T) {
	for _, v := range []string{"off", "0", "512MiB", "2GiB", "1073741824", "100B", "1KiB", "8TiB", "+5MiB", "007MiB",
		"512M", "2G", "1.5GiB", "abc", "-1", "MiB", "5iB", "5PiB", "OFF", "5 MiB", "99999999TiB", "5mib", "B", " 5MiB", "5MiB ", "9223372036854775807", "9223372036854775808", "8589934591GiB", "8589934592GiB"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), printProcsEnv+"=1", "GOMEMLIMIT="+v)
		out, err := cmd.CombinedOutput()
		started := err == nil
		if !started && !strings.Contains(string(out), "malformed GOMEMLIMIT") {
			t.Fatalf("GOMEMLIMIT=%q: %v\n%s", v, err, out)
		}
		if got := GOMEMLIMITApplies(v); got != started {
			t.Errorf("GOMEMLIMIT=%q: the runtime started: %v, GOMEMLIMITApplies says %v", v, started, got)
		}
	}
}

// Differential: the runtime started with each GOGC value applies it
// exactly when GOGCApplies says so (37 is not its default, 100).
func TestGOGCAgreesWithTheRuntime(t *testing.T) {
	for _, v := range []string{"37", "+37", "037", "-37", "off", "37%", " 37", "37 ", "OFF", "", "3.7", "2147483648", "0x25"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), printProcsEnv+"=1", "GOGC="+v)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOGC=%q: %v", v, err)
		}
		got := strings.Fields(string(out))[1]
		applied := got != "100"
		if v == "" {
			continue // unset: the runtime's default
		}
		if GOGCApplies(v) != applied {
			t.Errorf("GOGC=%q: the runtime collects at %s, GOGCApplies says %v", v, got, GOGCApplies(v))
		}
	}
}
