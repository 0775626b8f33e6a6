#!/bin/sh
# clusterapp: deb prerm / rpm %preun. On removal (not on upgrade), stop the whole suite and
# disable the socket, as dh_installsystemd and %systemd_preun do. An upgrade stops nothing:
# systemd keeps the socket and the postinst restarts the workers one at a time.
set -e

# deb: "remove", or upgrade/deconfigure/failed-upgrade; rpm: versions left after this one goes
# (0: removal).
case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac

if [ -d /run/systemd/system ]; then
	# The socket first, so no new connection starts a worker; the workers drain (up to
	# TimeoutStopSec=) before this returns.
	systemctl stop clusterapp.socket clusterapp-metrics.socket clusterapp.target 'clusterapp-worker@*.service' || true
fi
if command -v systemctl >/dev/null; then
	systemctl --no-reload disable clusterapp.socket clusterapp-metrics.socket clusterapp.target >/dev/null 2>&1 || true
fi
exit 0
