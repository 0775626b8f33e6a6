package config

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
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
		fmt.Println(runtime.GOMAXPROCS(0))
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
		applied := strings.TrimSpace(string(out)) == s
		if got := GOMAXPROCSApplies(v); got != applied {
			t.Errorf("GOMAXPROCS=%q: the runtime ran %s Ps (applied: %v), GOMAXPROCSApplies says %v", v, strings.TrimSpace(string(out)), applied, got)
		}
	}
}
