// Package units is clusterapp's view of its own systemd units, over D-Bus:
// the worker instances (clusterapp-worker@N.service), the socket
// (clusterapp.socket) and the pool (clusterapp.target).
//
// It talks to the service manager directly on its private socket,
// /run/systemd/private (go-systemd's NewSystemdConnectionContext): that
// needs root but no D-Bus daemon, so it works on minimal hosts and inside
// the project's sandbox. Jobs (start, stop, restart) are waited for through
// systemd's JobRemoved signal, which the manager sends to every direct
// connection. With Type=notify a start or restart job completes only when
// the new process has sent READY=1, and a stop job only when the process has
// exited, so "the job is done" means "the worker is serving" or "the worker
// has drained".
//
// Properties are read as systemd reports them; a cgroup counter systemd
// cannot provide (no memory or cpu controller, as in the sandbox) is
// reported as absent, never as zero.
package units
