package config

import "slices"

// SystemdSets are the variables systemd sets in each worker's environment
// itself and the worker reads: the inherited sockets, the notification
// socket and watchdog, the shared runtime directory, the journal stream. An EnvironmentFile= line
// replaces systemd's own value (the file is merged last), so an environment
// file that sets one cuts the worker off from systemd: with NOTIFY_SOCKET
// and LISTEN_FDS copied into the file, a worker's READY=1 went nowhere,
// systemd restarted it at every start timeout and the pool never served.
// TestSystemdSetsEveryVariableListed (systemd/) checks that systemd sets
// each of them for the shipped unit.
var SystemdSets = []string{
	"LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES",
	"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
	"RUNTIME_DIRECTORY", "JOURNAL_STREAM",
}

// SetBySystemd reports whether systemd sets key for each worker.
func SetBySystemd(key string) bool { return slices.Contains(SystemdSets, key) }
