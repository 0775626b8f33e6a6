#!/bin/sh
# clusterapp: rpm %postun, as %systemd_postun_with_restart: after an upgrade (run from the old
# package once the new one is in place), daemon-reload, then restart the running pool one
# worker at a time with the new binary's `clusterapp reload`; failures are warnings. After an
# erase, delete the workers' runtime directory and daemon-reload. Never fails. $1: versions
# left (0: erase, 1 or more: upgrade).
#@common

if [ "$1" = 0 ]; then
	# Erased: the workers' runtime directory (RuntimeDirectoryPreserve=yes) goes with them, or a
	# later install reads this one's shared tables and counters.
	rm -rf /run/clusterapp /run/private/clusterapp
fi
systemd_running || exit 0
systemctl daemon-reload >/dev/null 2>&1 || :
if [ "$1" -ge 1 ] 2>/dev/null; then
	rolling_restart
	systemctl try-restart "$exporter" >/dev/null 2>&1 || exporter_failed
fi
exit 0
