#!/bin/sh
# clusterapp: deb postinst. What dh_installsystemd's snippets do, for clusterapp's sockets:
#   deb-systemd-helper enables them on first install and remembers the operator's choice after
#   (a socket they disabled stays disabled across upgrades, and across remove and reinstall);
#   deb-systemd-invoke starts them, honouring policy-rc.d (exit 101: nothing is started);
#   on upgrade the running workers restart one at a time (`clusterapp reload`), unless
#   policy-rc.d forbids restarting clusterapp.
# Nothing here fails the package: a port already taken or a worker that does not come back is a
# warning, and dpkg leaves the package configured.
set -e
#@common

case "$1" in
configure | abort-upgrade | abort-deconfigure | abort-remove) ;;
*) exit 0 ;;
esac

for unit in $units; do
	deb-systemd-helper unmask "$unit" >/dev/null || true
	if deb-systemd-helper --quiet was-enabled "$unit"; then
		deb-systemd-helper enable "$unit" >/dev/null || true
	else
		deb-systemd-helper update-state "$unit" >/dev/null || true
	fi
done

systemd_running || exit 0
systemctl --system daemon-reload >/dev/null || true
apply_sysctl

if [ "$1" = configure ] && [ -n "$2" ]; then
	# Upgrade: the same policy question deb-systemd-invoke asks before a restart.
	rc=0
	if command -v policy-rc.d >/dev/null; then policy-rc.d clusterapp.service restart || rc=$?; fi
	if [ "$rc" = 101 ]; then
		warn "policy-rc.d forbids restarting clusterapp: the workers keep running the old binary until restarted"
	else
		rolling_restart
		deb-systemd-invoke try-restart "$exporter" >/dev/null || exporter_failed
	fi
fi
for unit in $units; do
	deb-systemd-invoke start "$unit" >/dev/null || warn "$unit did not start (is its port taken? journalctl -u $unit); the package is installed"
done
exit 0
