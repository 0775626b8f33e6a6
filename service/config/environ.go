package config

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// EnvironKeys are the names of the process's environment variables, for
// Unknown.
func EnvironKeys() []string {
	var keys []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	return keys
}

// The kernel's limits on a new program's environment, which systemd's own
// checks do not enforce: an environment file may hold a value systemd
// passes on whole, and then every worker's execve fails with E2BIG
// ("Failed to execute /usr/bin/clusterapp: Argument list too long", exit
// 203/EXEC, restarted at once, again and again).
const (
	// MaxArgStrlen is the most one argument or KEY=value string may take,
	// its terminating NUL included (MAX_ARG_STRLEN, 32 pages of 4 KiB,
	// include/uapi/linux/binfmts.h): a KEY=value of 131071 bytes passes,
	// one byte more is E2BIG.
	MaxArgStrlen = 128 << 10
	// ArgMax is the most the arguments and environment of a program may
	// take together, strings and pointers: a quarter of its stack limit,
	// 2 MiB under systemd's default LimitSTACK= of 8 MiB (getconf ARG_MAX).
	// systemd itself drops a single value longer than that, silently for
	// the worker, which then runs with the default.
	ArgMax = 2 << 20
	// environReserve is what the check leaves of ArgMax for what is not in
	// the files: the variables systemd sets (LISTEN_*, NOTIFY_SOCKET,
	// INVOCATION_ID, ...), the unit's Environment= lines and the
	// arguments; a few hundred bytes in practice.
	environReserve = 16 << 10
)

// EnvStringProblem returns why KEY=value cannot reach a program's
// environment, "" when it can.
func EnvStringProblem(key, value string) string {
	size := len(key) + 1 + len(value) + 1 // "KEY=value" and its NUL
	if size <= MaxArgStrlen {
		return ""
	}
	return fmt.Sprintf("%s is %d bytes long: one variable's KEY=value may take at most %d bytes, the kernel's limit "+
		"on one environment string (MAX_ARG_STRLEN, 128 KiB with its NUL); every worker's start would fail "+
		"with E2BIG (\"Argument list too long\")", key, len(value), MaxArgStrlen-1)
}

// EnvSizeProblem returns why vars together cannot reach a program's
// environment, "" when they can; each string is counted with its NUL and
// its pointer, as the kernel counts them.
func EnvSizeProblem(vars map[string]string) string {
	total := 0
	keys := make([]string, 0, len(vars))
	for k, v := range vars {
		total += len(k) + 1 + len(v) + 1 + 8
		keys = append(keys, k)
	}
	if total+environReserve <= ArgMax {
		return ""
	}
	sort.Slice(keys, func(i, j int) bool { return len(vars[keys[i]]) > len(vars[keys[j]]) })
	return fmt.Sprintf("the %d variables set take %d bytes of environment (the largest: %s); with the %d KiB "+
		"left for what systemd adds, that is over %d bytes, the kernel's limit on a program's arguments and "+
		"environment together (ARG_MAX under the default 8 MiB stack limit); every worker's start would fail "+
		"with E2BIG (\"Argument list too long\")", len(vars), total, strings.Join(keys[:min(3, len(keys))], ", "), environReserve>>10, ArgMax)
}
