#!/bin/sh
# clusterapp: deb postrm, as dh_installsystemd's snippets: on remove, mask the sockets through
# deb-systemd-helper (its mask is lifted by a reinstall, which then restores the enable state it
# recorded); on purge, forget that state and delete /etc/clusterapp and the workers' runtime
# directory (their shared tables and counters). daemon-reload so systemd
# forgets the removed units and the generator's drop-ins. Never fails.
set -e
#@common

case "$1" in
remove)
	for unit in $units; do deb-systemd-helper mask "$unit" >/dev/null || true; done
	;;
purge)
	for unit in $units; do
		deb-systemd-helper purge "$unit" >/dev/null || true
		deb-systemd-helper unmask "$unit" >/dev/null || true
	done
	rm -rf /etc/clusterapp
	# The workers' runtime directory outlives them (RuntimeDirectoryPreserve=yes, so a restart keeps
	# the shared tables); with DynamicUser it is /run/private/clusterapp behind the /run/clusterapp
	# link. A reinstall after purge read the purged install's counters from it.
	rm -rf /run/clusterapp /run/private/clusterapp
	;;
esac
if systemd_running; then systemctl --system daemon-reload >/dev/null || true; fi
exit 0
