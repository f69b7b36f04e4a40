#!/bin/bash
# mmdebstrap customize hook: turns the plain trixie rootfs at $1 into the
# vmdock guest. Runs on the builder; guest commands run through chroot
# (through qemu-user/binfmt for a foreign arch).
#
# usage: customize.sh ROOTFS TOOLSDIR [ARCH]   (TOOLSDIR from build-tools.sh,
# ARCH the image's Debian architecture; build.sh passes it)
set -euo pipefail

root=$1
tools=${2:-}
arch=${3:-}
here=$(cd "$(dirname "$0")/.." && pwd)
[ -n "$tools" ] || { echo "customize.sh: no tools directory (nerdctl, buildkitd, buildctl) given" >&2; exit 1; }

cp -rT "$here/overlay" "$root"
chmod 0755 "$root/usr/lib/vmdock/prepare-agent" "$root/etc/initramfs-tools/hooks/vmdock-trim"
chmod 0644 "$root/usr/lib/systemd/system/vmdock-agent.service" "$root/etc/fstab" \
	"$root/etc/systemd/network/20-eth0.network" "$root/etc/initramfs-tools/conf.d/vmdock" \
	"$root/usr/share/initramfs-tools/modules.d/vmdock" \
	"$root/etc/systemd/system/containerd.service.d/vmdock-boot.conf" \
	"$root/etc/systemd/system/docker.service.d/vmdock-boot.conf" \
	"$root/usr/lib/systemd/system/buildkit.service" "$root/etc/buildkit/buildkitd.toml" \
	"$root/etc/nerdctl/nerdctl.toml"

# On PATH for the agent, for `vmdock ssh` users, and for nerdctl itself,
# which runs buildctl from PATH for `nerdctl build`.
for b in nerdctl buildkitd buildctl; do
	[ -x "$tools/$b" ] || { echo "customize.sh: $tools/$b missing; run hack/image/build-tools.sh" >&2; exit 1; }
	install -m 0755 "$tools/$b" "$root/usr/local/bin/$b"
done
# Debian puts the CNI plugins in /usr/lib/cni; nerdctl.toml names that, and
# the link serves everything that only knows the upstream default.
if [ -e "$root/opt/cni/bin" ] && [ ! -L "$root/opt/cni/bin" ]; then
	echo "customize.sh: $root/opt/cni/bin exists and is not a link; cannot point it at /usr/lib/cni" >&2
	exit 1
fi
mkdir -p "$root/opt/cni"
ln -sfn /usr/lib/cni "$root/opt/cni/bin"

echo vmdock >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tvmdock\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
# DNS comes from DHCP through systemd-resolved (QEMU slirp and vz NAT hand
# out different servers).
ln -sfn ../run/systemd/resolve/stub-resolv.conf "$root/etc/resolv.conf"

# No password login at all: the agent is the only way in.
chroot "$root" passwd -l root >/dev/null

# A foreign-arch guest's own tools run emulated through qemu-user, many
# times slower than the builder's. systemctl --root and depmod -b do the
# same offline work (links from [Install] sections; module indexes, whose
# format does not depend on the CPU) with the builder's copies, when it
# has them. A native build keeps running the guest's own.
foreign=0
if [ -n "$arch" ] && [ "$arch" != "$(dpkg --print-architecture)" ]; then
	foreign=1
fi
guest_systemctl() {
	if [ $foreign = 1 ] && command -v systemctl >/dev/null; then
		systemctl --root="$root" "$@"
	else
		chroot "$root" systemctl "$@"
	fi
}
guest_depmod() {
	if [ $foreign = 1 ] && command -v depmod >/dev/null; then
		depmod -b "$root" -a "$1"
	else
		chroot "$root" depmod -a "$1"
	fi
}

# iptables through its legacy backend: dockerd runs iptables some forty
# times as it starts (its chains, the bridge's rules), and under TCG a call
# through the nft backend, which reads the whole ruleset first, took 1.6x
# the legacy call's time. The agent's iptables-restore follows the same
# alternative. The builder's update-alternatives does it offline.
for t in iptables ip6tables; do
	update-alternatives --root "$root" --quiet --set "$t" "/usr/sbin/$t-legacy"
done

guest_systemctl enable vmdock-agent.service systemd-networkd.service systemd-resolved.service
# The agent starts these after it has mounted the data disk at
# /var/lib/docker and /var/lib/containerd; buildkit only for the containerd
# runtime.
guest_systemctl disable docker.service docker.socket containerd.service buildkit.service
# Nothing may reach the internet on its own, and nothing periodic should
# burn CPU in a TCG guest. Nor anything the guest never uses at boot:
# - the gettys (the serial console, tty1, hvc0 on vz): root is locked and
#   the agent is the only way in, yet systemd-getty-generator starts one
#   per console. Masking the templates masks every instance.
# - the first-boot jobs ConditionNeedsUpdate= runs on every new instance,
#   since each one's /etc and /var start without .updated: ldconfig (dpkg's
#   trigger made ld.so.cache at build time), the hwdb rebuild (udev's
#   postinst made hwdb.bin) and journalctl's catalog (explanations for
#   `journalctl -x` only). Under TCG each costs a second or more of the
#   CPU the boot is bound by.
# - binfmt-support's unit: its database is empty (qemu-user-static's
#   formats are binfmt.d files, which systemd-binfmt registers).
# - what serves people or hardware the guest does not have: logind (no one
#   logs in), the drm and pstore module loads, debugfs, tracefs and
#   hugetlbfs mounts. Each is a process or a mount the boot waits through.
# (mask by hand: systemctl mask refuses units that are not installed, and
# we want them masked even if a later package brings them in)
for u in \
	apt-daily.timer apt-daily.service apt-daily-upgrade.timer apt-daily-upgrade.service \
	systemd-timesyncd.service ntpsec.service chrony.service \
	man-db.timer man-db.service e2scrub_all.timer e2scrub_all.service e2scrub_reap.service \
	fstrim.timer fstrim.service dpkg-db-backup.timer dpkg-db-backup.service \
	systemd-networkd-wait-online.service \
	getty.target getty@.service serial-getty@.service autovt@.service console-getty.service \
	binfmt-support.service systemd-logind.service modprobe@drm.service modprobe@efi_pstore.service \
	sys-kernel-debug.mount sys-kernel-tracing.mount dev-hugepages.mount \
	ldconfig.service systemd-hwdb-update.service systemd-journal-catalog-update.service; do
	ln -sfn /dev/null "$root/etc/systemd/system/$u"
done

kver=$(ls "$root/usr/lib/modules" | sort -V | tail -n1)
"$here/files/trim-modules.sh" "$root/usr/lib/modules/$kver"
guest_depmod "$kver"

# The initramfs was made once, as the kernel was installed, with the
# configuration files/initramfs-setup.sh put in place before any package
# (what trim-modules removes is nothing it holds).

# Leftovers that only cost space.
rm -rf "$root/var/cache/apt/"*.bin "$root/var/lib/apt/lists/"* "$root/var/log/"*.log \
	"$root/usr/share/doc-base" "$root/usr/share/bug"
