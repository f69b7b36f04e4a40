#!/bin/bash
# mmdebstrap customize hook: turns the plain trixie rootfs at $1 into the
# vmdock guest. Runs on the builder; guest commands run through chroot
# (through qemu-user/binfmt for a foreign arch).
set -euo pipefail

root=$1
here=$(cd "$(dirname "$0")/.." && pwd)

cp -rT "$here/overlay" "$root"
chmod 0755 "$root/usr/lib/vmdock/prepare-agent"
chmod 0644 "$root/usr/lib/systemd/system/vmdock-agent.service" "$root/etc/fstab" \
	"$root/etc/systemd/network/20-eth0.network" "$root/etc/initramfs-tools/conf.d/vmdock"

echo vmdock >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tvmdock\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
# DNS comes from DHCP through systemd-resolved (QEMU slirp and vz NAT hand
# out different servers).
ln -sfn ../run/systemd/resolve/stub-resolv.conf "$root/etc/resolv.conf"

# No password login at all: the agent is the only way in.
chroot "$root" passwd -l root >/dev/null

chroot "$root" systemctl enable vmdock-agent.service systemd-networkd.service systemd-resolved.service
# The agent starts these after it has mounted the data disk at
# /var/lib/docker and /var/lib/containerd.
chroot "$root" systemctl disable docker.service docker.socket containerd.service
# Nothing may reach the internet on its own, and nothing periodic should
# burn CPU in a TCG guest.
# (mask by hand: systemctl mask refuses units that are not installed, and
# we want them masked even if a later package brings them in)
for u in \
	apt-daily.timer apt-daily.service apt-daily-upgrade.timer apt-daily-upgrade.service \
	systemd-timesyncd.service ntpsec.service chrony.service \
	man-db.timer man-db.service e2scrub_all.timer e2scrub_all.service e2scrub_reap.service \
	fstrim.timer fstrim.service dpkg-db-backup.timer dpkg-db-backup.service \
	systemd-networkd-wait-online.service; do
	ln -sfn /dev/null "$root/etc/systemd/system/$u"
done

kver=$(ls "$root/usr/lib/modules" | sort -V | tail -n1)
"$here/files/trim-modules.sh" "$root/usr/lib/modules/$kver"
chroot "$root" depmod -a "$kver"

cp "$here/files/initramfs-modules" "$root/etc/initramfs-tools/modules"
chroot "$root" update-initramfs -u -k "$kver"

# Leftovers that only cost space.
rm -rf "$root/var/cache/apt/"*.bin "$root/var/lib/apt/lists/"* "$root/var/log/"*.log \
	"$root/usr/share/doc-base" "$root/usr/share/bug"
