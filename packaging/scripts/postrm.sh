#!/bin/sh
# clusterapp: deb postrm / rpm %postun.
#   removal: daemon-reload, so systemd forgets the removed units and the generator's drop-ins;
#   purge (deb): remove /etc/clusterapp, whatever the operator left in it;
#   upgrade (rpm, run from the OLD package after the new one is in place): daemon-reload and
#     restart the running workers one at a time, as %systemd_postun_with_restart does.
set -e

case "$1" in
remove | 0 | purge) phase=$1 ;;
[0-9]*) phase=rpm-upgrade ;;
*) exit 0 ;;
esac
[ "$phase" != 0 ] || phase=remove

if [ "$phase" = purge ]; then
	rm -rf /etc/clusterapp
fi

[ -d /run/systemd/system ] || exit 0
systemctl daemon-reload

if [ "$phase" = rpm-upgrade ]; then
	# The same rollout as the deb postinst's (see there): one worker at a time, each confirmed
	# active before the next goes down, bounded.
	for unit in $(systemctl list-units --plain --no-legend --state=active 'clusterapp-worker@*.service' | awk '{print $1}'); do
		systemctl restart "$unit"
		tries=0
		until systemctl is-active --quiet "$unit"; do
			tries=$((tries + 1))
			if [ "$tries" -gt 300 ]; then
				echo "clusterapp: $unit did not come back within 30s; stopping the rollout (journalctl -u $unit)" >&2
				exit 1
			fi
			sleep 0.1
		done
	done
fi
exit 0
