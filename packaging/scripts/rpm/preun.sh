#!/bin/sh
# clusterapp: rpm %preun, as %systemd_preun: on erase (not upgrade) disable the sockets and stop
# the whole service (the workers drain, then the sockets close). Never fails. $1: versions left
# once this one goes (0: erase).
#@common

if [ "$1" -eq 0 ] 2>/dev/null; then
	systemctl --no-reload disable $units >/dev/null 2>&1 || :
	if systemd_running; then
		systemctl stop clusterapp.service $units clusterapp.target >/dev/null 2>&1 || :
	fi
fi
exit 0
