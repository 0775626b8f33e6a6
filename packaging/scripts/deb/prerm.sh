#!/bin/sh
# clusterapp: deb prerm. On removal (not on upgrade), stop the whole service: the workers drain,
# then the sockets close (clusterapp.service groups them), through deb-systemd-invoke as
# dh_installsystemd does. An upgrade stops nothing: systemd keeps the socket and the postinst
# restarts the workers one at a time. Never fails.
set -e
#@common

[ "$1" = remove ] || exit 0
if systemd_running; then
	deb-systemd-invoke stop clusterapp.service >/dev/null || warn "stopping clusterapp.service failed; continuing"
	# Sockets started without clusterapp.service (enabled at boot) are stopped by name too.
	deb-systemd-invoke stop $units clusterapp.target >/dev/null || true
fi
exit 0
