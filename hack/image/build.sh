#!/bin/bash
# Builds the vmdock guest image (Debian trixie, systemd, docker.io, plus
# nerdctl and BuildKit built from Go modules) with mmdebstrap, without loop
# mounts, and packs it as <out>/vmdock-<arch>.tar.zst.
# See hack/image/README.md for what the image contains and why.
#
# usage: hack/image/build.sh --arch amd64|arm64 [--out DIR]   (as root, on Debian, with Go)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
arch=
out=$here/out
suite=trixie

usage() {
	echo "usage: $0 --arch amd64|arm64 [--out DIR]" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--arch) arch=${2:-}; shift 2 || usage ;;
	--arch=*) arch=${1#*=}; shift ;;
	--out) out=${2:-}; shift 2 || usage ;;
	--out=*) out=${1#*=}; shift ;;
	-h | --help) usage ;;
	*) echo "build.sh: unknown argument '$1' (accepted: --arch amd64|arm64, --out DIR)" >&2; exit 2 ;;
	esac
done

case $arch in
amd64) console=ttyS0 ;;   # QEMU's 16550 on x86
arm64) console=ttyAMA0 ;; # QEMU virt's PL011
"") usage ;;
*) echo "build.sh: bad --arch '$arch' (accepted: amd64, arm64)" >&2; exit 2 ;;
esac
[ -n "$out" ] || usage

if [ "$(id -u)" != 0 ]; then
	echo "build.sh: must run as root (mmdebstrap --mode=root, mkfs.ext4 -d ownership)" >&2
	exit 1
fi

# hvc0 comes last so that on vz (virtio console, no UART) it is /dev/console;
# on QEMU without a virtconsole device hvc0 never registers and the UART stays
# /dev/console. apparmor=0: Debian's kernel enables AppArmor and dockerd
# refuses to run containers without apparmor_parser; loading profiles would
# cost boot time under TCG. wait-online is masked because nothing in the
# guest needs it and it costs ~15 s under TCG.
cmdline="root=/dev/vda rw console=$console console=hvc0 net.ifnames=0 apparmor=0 panic=-1 systemd.mask=systemd-networkd-wait-online.service"

t0=$(date +%s)
stamp() { echo "== $(($(date +%s) - t0))s: $*"; }

# ---- Go tools for the guest -------------------------------------------------
# First, because it is the step most likely to fail (module proxy, Go
# version) and the cheapest to redo: the output stays in $out between builds
# and is only rebuilt when the pinned modules or the Go version change.
tools=$out/.tools-$arch
stamp "nerdctl and BuildKit for linux/$arch"
bash "$here/build-tools.sh" --arch "$arch" --out "$tools"
# shellcheck source=/dev/null
. "$tools/versions.env"

# ---- builder tools -------------------------------------------------------
need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v zstd >/dev/null || need+=(zstd)
command -v sha256sum >/dev/null || need+=(coreutils)
native=$(dpkg --print-architecture)
if [ "$arch" != "$native" ]; then
	[ -e /usr/bin/qemu-aarch64-static ] || need+=(qemu-user-static)
	command -v update-binfmts >/dev/null || need+=(binfmt-support)
	# mmdebstrap refuses a foreign arch without it ("install arch-test for
	# foreign architecture support"), and it is only a Recommends.
	command -v arch-test >/dev/null || need+=(arch-test)
fi
if [ ${#need[@]} -gt 0 ]; then
	stamp "installing builder packages: ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if [ "$arch" != "$native" ]; then
	# Foreign-arch maintainer scripts run through qemu-user via binfmt_misc.
	if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
		mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
	fi
	update-binfmts --enable >/dev/null 2>&1 || true
	if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
		echo "build.sh: binfmt_misc has no qemu-aarch64 entry; cannot run arm64 binaries on this $native builder" >&2
		exit 1
	fi
fi

# ---- mirror from the host's apt configuration -----------------------------
# The repository names no mirror: we use whatever this host uses, with our
# suite instead of the host's.
host_suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$host_suite" ] || { echo "build.sh: cannot read VERSION_CODENAME from /etc/os-release" >&2; exit 1; }

# find_uri SUITE prints the first enabled "deb" URI that serves SUITE.
find_uri() {
	local want=$1 f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk -v s="$want" '
			$1 == "deb" {
				i = 2
				if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) == s) { print $i; exit }
			}' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk -v s="$want" '
			BEGIN { RS = ""; FS = "\n" }
			{
				types = ""; uris = ""; suites = ""; enabled = "yes"
				for (j = 1; j <= NF; j++) {
					line = $j
					if (line ~ /^#/) continue
					k = tolower(line); sub(/:.*/, "", k)
					v = line; sub(/^[^:]*:[ \t]*/, "", v)
					if (k == "types") types = v
					else if (k == "uris") uris = v
					else if (k == "suites") suites = v
					else if (k == "enabled") enabled = tolower(v)
				}
				if (enabled == "no" || (" " types " ") !~ / deb /) next
				n = split(suites, ss, /[ \t]+/)
				for (j = 1; j <= n; j++) if (ss[j] == s) { split(uris, us, /[ \t]+/); print us[1]; exit }
			}' "$f"
	done
}
mirror=$(find_uri "$host_suite" | head -n1)
security=$(find_uri "$host_suite-security" | head -n1)
if [ -z "$mirror" ]; then
	echo "build.sh: no 'deb' source for suite $host_suite in /etc/apt/sources.list{,.d/*.list,.d/*.sources}" >&2
	exit 1
fi
sources=("deb $mirror $suite main")
[ -z "$security" ] || sources+=("deb $security $suite-security main")

# ---- rootfs ---------------------------------------------------------------
dest=$out/vmdock-$arch
work=$out/.work-$arch
rootfs=$work/rootfs
rm -rf "$work" "$dest"
mkdir -p "$work" "$dest"
trap 'rm -rf "$work"' EXIT

packages=(
	"linux-image-$arch" initramfs-tools zstd systemd-sysv systemd-resolved udev dbus kmod
	docker.io containerd runc iptables iproute2 e2fsprogs
	qemu-user-static binfmt-support ca-certificates procps
	containernetworking-plugins
)
pkglist=$(IFS=,; echo "${packages[*]}")

stamp "mmdebstrap $suite/$arch from the host's mirror"
# Docs, man pages and translations are never read in the guest; dropping
# them at unpack time is cheaper than deleting them afterwards.
mmdebstrap --variant=minbase --mode=root --architectures="$arch" \
	--aptopt='Apt::Install-Recommends "false"' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-include=/usr/share/locale/locale.alias' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/lintian/*' \
	--include="$pkglist" \
	--setup-hook="'$here/files/initramfs-setup.sh' \"\$1\"" \
	--customize-hook="'$here/files/customize.sh' \"\$1\" '$tools' '$arch'" \
	"$suite" "$rootfs" "${sources[@]}"

# ---- kernel, initrd, versions --------------------------------------------
stamp "extracting kernel and initrd"
kver=$(ls "$rootfs/usr/lib/modules" | sort -V | tail -n1)
[ -n "$kver" ] || { echo "build.sh: no kernel in $rootfs/usr/lib/modules" >&2; exit 1; }
"$here/files/extract-kernel.sh" "$rootfs/boot/vmlinuz-$kver" "$dest/vmlinuz" "$arch"
cp "$rootfs/boot/initrd.img-$kver" "$dest/initrd.img"

pkgversion() {
	dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f='${Version}' "$1" 2>/dev/null || true
}
kpkg=$(dpkg-query --admindir="$rootfs/var/lib/dpkg" -S "/usr/lib/modules/$kver/modules.order" 2>/dev/null | cut -d: -f1 || true)
[ -n "$kpkg" ] || kpkg=linux-image-$kver

# The host boots kernel and initrd directly; copies inside the disk would
# only cost space.
rm -f "$rootfs/boot/vmlinuz-"* "$rootfs/boot/initrd.img-"* "$rootfs/boot/System.map-"* "$rootfs"/vmlinuz* "$rootfs"/initrd.img*

# ---- disk.raw -------------------------------------------------------------
stamp "mkfs.ext4 -d"
used=$(du -s -B1 "$rootfs" | cut -f1)
nfiles=$(find "$rootfs" -xdev | wc -l)
mib=$((1024 * 1024))
# Content + 15% + room for the journal and group metadata; the agent grows
# the file system at first boot, so small is better for download size.
size=$(((used * 115 / 100 + 96 * mib + mib - 1) / mib * mib))
# Make sure the default 16 KiB per inode leaves room for a few thousand files
# more than we ship; otherwise ask for the inodes explicitly.
inodes=$((nfiles + nfiles / 4 + 4096))
mkfsopts=(-q -F -t ext4 -L vmdock -m 1 -d "$rootfs")
if [ $((size / 16384)) -lt $inodes ]; then
	mkfsopts+=(-N "$inodes")
fi
rm -f "$dest/disk.raw"
truncate -s "$size" "$dest/disk.raw"
mkfs.ext4 "${mkfsopts[@]}" "$dest/disk.raw"

# ---- manifest --------------------------------------------------------------
stamp "manifest"
jstr() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
{
	printf '{\n'
	printf '  "arch": %s,\n' "$(jstr "$arch")"
	printf '  "cmdline": %s,\n' "$(jstr "$cmdline")"
	printf '  "kernelVersion": %s,\n' "$(jstr "$kver")"
	printf '  "buildTime": %s,\n' "$(jstr "$(date -u +%Y-%m-%dT%H:%M:%SZ)")"
	printf '  "suite": %s,\n' "$(jstr "$suite")"
	printf '  "files": {\n'
	sep=
	for f in disk.raw vmlinuz initrd.img; do
		printf '%s    %s: %s' "$sep" "$(jstr "$f")" "$(jstr "$(sha256sum "$dest/$f" | cut -d' ' -f1)")"
		sep=$',\n'
	done
	printf '\n  },\n'
	printf '  "packages": {\n'
	sep=
	printf '    "linux-image": %s' "$(jstr "$(pkgversion "$kpkg")")"
	# udev and initramfs-tools tell the host agent the initramfs makes the
	# /dev/disk/by-id links, so it may boot with root= naming the disk serial.
	for p in "$kpkg" "linux-image-$arch" systemd udev initramfs-tools docker.io containerd runc iptables qemu-user-static containernetworking-plugins; do
		v=$(pkgversion "$p")
		[ -n "$v" ] || continue
		printf ',\n    %s: %s' "$(jstr "$p")" "$(jstr "$v")"
	done
	# Not Debian packages: Go module versions, built by build-tools.sh.
	printf ',\n    "nerdctl": %s' "$(jstr "$NERDCTL_VERSION")"
	printf ',\n    "buildkit": %s' "$(jstr "$BUILDKIT_VERSION")"
	printf '\n  }\n}\n'
} >"$dest/manifest.json"

# ---- pack -------------------------------------------------------------------
stamp "packing $out/vmdock-$arch.tar.zst"
tar --sparse --format=gnu --owner=0 --group=0 --numeric-owner \
	-C "$dest" -cf - disk.raw vmlinuz initrd.img manifest.json |
	zstd -q -T0 -10 -f -o "$out/vmdock-$arch.tar.zst"

stamp "done"
apparent=$(stat -c %s "$dest/disk.raw")
allocated=$(($(stat -c %b "$dest/disk.raw") * $(stat -c %B "$dest/disk.raw")))
echo "build time:      $(($(date +%s) - t0)) s"
echo "kernel:          $kver ($kpkg $(pkgversion "$kpkg"))"
echo "docker.io:       $(pkgversion docker.io)"
echo "containerd:      $(pkgversion containerd), nerdctl $NERDCTL_VERSION, buildkit $BUILDKIT_VERSION"
echo "disk.raw:        $((apparent / mib)) MiB apparent, $((allocated / mib)) MiB allocated"
echo "vmlinuz:         $(($(stat -c %s "$dest/vmlinuz") / 1024)) KiB"
echo "initrd.img:      $(($(stat -c %s "$dest/initrd.img") / 1024)) KiB"
echo "tar.zst:         $(($(stat -c %s "$out/vmdock-$arch.tar.zst") / mib)) MiB  ($out/vmdock-$arch.tar.zst)"
