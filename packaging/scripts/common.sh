# clusterapp maintainer scripts: helpers shared by the deb and rpm scripts. packaging/build
# inlines this file where a script says `#@common` (nfpm ships each script as one file).
# Nothing here may fail the package transaction: starting, restarting or reloading a service is
# attempted, and a failure is a warning naming what failed (the `|| true` of dh_installsystemd's
# snippets). This file is inlined into the rpm scriptlets too: nothing Debian-specific here.

units="clusterapp.socket clusterapp-metrics.socket"

systemd_running() { [ -d /run/systemd/system ]; }

warn() { echo "clusterapp: warning: $*" >&2; }

# apply_sysctl re-applies every sysctl.d file in precedence order, as at boot, so an operator's
# /etc/sysctl.d/ overrides keep winning over the shipped /usr/lib/sysctl.d/60-clusterapp.conf.
# Keys the kernel refuses (a container cannot change fs.*) are reported, not fatal.
apply_sysctl() {
	for tool in /usr/lib/systemd/systemd-sysctl /lib/systemd/systemd-sysctl; do
		if [ -x "$tool" ]; then
			"$tool" || warn "systemd-sysctl could not apply every setting (see above); continuing"
			return 0
		fi
	done
}

# rolling_restart restarts the running workers one at a time with the new binary's own
# `clusterapp reload`: each restart waits for the new process's READY=1 before the next worker
# goes down. systemd keeps holding the socket and a stopping worker drains, so no request fails.
# A worker that does not come back is named, and the transaction goes on: the old workers keep
# serving, and `clusterapp reload` (or `systemctl reload clusterapp`) retries.
rolling_restart() {
	if systemctl list-units --plain --no-legend --state=active 'clusterapp-worker@*.service' 2>/dev/null | grep -q .; then
		clusterapp reload || warn "the rolling restart stopped (the worker named above did not come back); the package is installed, the other workers serve on; retry with: systemctl reload clusterapp"
	fi
}

# The metrics exporter runs the worker program too: after an upgrade it is restarted onto the new
# one, if it runs (a scrape meanwhile waits in its socket's backlog), each package format its own
# way (the deb's postinst, the rpm's %postun).
exporter=clusterapp-metrics.service
exporter_failed() {
	warn "the metrics exporter did not restart onto the new version; retry with: systemctl restart $exporter"
}
