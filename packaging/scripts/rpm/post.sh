#!/bin/sh
# clusterapp: rpm %post, as %systemd_post: on first install `systemctl preset` the sockets (the
# distribution's or the admin's preset policy decides whether they are enabled; nothing is
# started: Fedora starts a service only when the admin asks). Every time: daemon-reload and the
# sysctls applied. Never fails. $1: versions installed once this one is (1: first install).
#@common

if systemd_running; then
	systemctl daemon-reload >/dev/null 2>&1 || :
	apply_sysctl
fi
if [ "$1" -eq 1 ] 2>/dev/null; then
	systemctl --no-reload preset $units >/dev/null 2>&1 || :
fi
exit 0
