#!/bin/sh
# clusterapp: deb postinst / rpm %post. What debhelper's dh_installsystemd and the RPM
# %systemd_post macro do, for clusterapp's units:
#   first install: daemon-reload, apply sysctl.d, enable and start clusterapp.socket;
#   upgrade (deb): daemon-reload, apply sysctl.d, restart the running workers one at a time;
#   upgrade (rpm): daemon-reload, apply sysctl.d; the old package's %postun restarts the workers
#                  (as %systemd_postun_with_restart does), after rpm removed its files.
# Without a running systemd (image builds, chroots) it only enables the socket: the files are in
# place, systemd applies them at the next boot.
set -e

# deb: "configure" OLD-VERSION (empty on first install), or abort-* after a failed upgrade or
# removal; rpm: the number of versions installed once this one is (1: first install).
case "$1" in
configure) if [ -z "$2" ]; then phase=install; else phase=upgrade; fi ;;
abort-upgrade | abort-remove | abort-deconfigure) phase=abort ;;
1) phase=install ;;
[0-9]*) phase=rpm-upgrade ;;
*) exit 0 ;;
esac

systemd_running() { [ -d /run/systemd/system ]; }

# policy-rc.d is how Debian image builds forbid starting services (it exits 101 to deny);
# deb-systemd-invoke honours it, so does this.
start_allowed() {
	command -v policy-rc.d >/dev/null || return 0
	rc=0
	policy-rc.d clusterapp.socket start || rc=$?
	[ "$rc" -ne 101 ]
}

# apply_sysctl re-applies every sysctl.d file in precedence order, as at boot, so an operator's
# /etc/sysctl.d/ overrides keep winning over the shipped /usr/lib/sysctl.d/60-clusterapp.conf.
# Keys the kernel refuses (a container cannot change fs.*) are reported, not fatal.
apply_sysctl() {
	for tool in /usr/lib/systemd/systemd-sysctl /lib/systemd/systemd-sysctl; do
		if [ -x "$tool" ]; then
			"$tool" || echo "clusterapp: systemd-sysctl could not apply every setting (see above); continuing" >&2
			return 0
		fi
	done
}

# rolling_restart restarts the active workers one at a time with the new binary's own
# `clusterapp reload`: each restart waits for the new process's READY=1 before the next worker
# goes down, and the rollout stops at the first failure, naming the worker and why. systemd keeps
# holding the listening socket and a stopping worker drains its connections, so no request fails.
rolling_restart() {
	if systemctl list-units --plain --no-legend --state=active 'clusterapp-worker@*.service' | grep -q .; then
		clusterapp reload
	fi
}

case $phase in
install)
	if command -v systemctl >/dev/null; then
		# Enable works on files alone, so it works in chroots and image builds too.
		systemctl --no-reload enable clusterapp.socket clusterapp-metrics.socket >/dev/null 2>&1 || true
	fi
	if systemd_running; then
		systemctl daemon-reload
		apply_sysctl
		if start_allowed; then
			systemctl start clusterapp.socket
			# The metrics listener is not worth failing the install for (its port may be taken).
			systemctl start clusterapp-metrics.socket || echo "clusterapp: clusterapp-metrics.socket did not start; the service runs without its metrics listener (see CLUSTERAPP_METRICS_LISTEN)" >&2
		fi
	fi
	;;
upgrade)
	if systemd_running; then
		systemctl daemon-reload
		apply_sysctl
		rolling_restart
	fi
	;;
rpm-upgrade | abort)
	if systemd_running; then
		systemctl daemon-reload
		apply_sysctl
	fi
	;;
esac
exit 0
