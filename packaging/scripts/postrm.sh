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
	# The same rollout as the deb postinst's: the new binary's readiness-gated `clusterapp reload`.
	if systemctl list-units --plain --no-legend --state=active 'clusterapp-worker@*.service' | grep -q .; then
		clusterapp reload || exit 1
	fi
fi
exit 0
