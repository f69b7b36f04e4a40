#!/bin/bash
# mmdebstrap setup hook: puts the guest's initramfs configuration into the
# empty rootfs at $1 before any package is installed, so the initramfs the
# kernel's installation makes is already the guest's (made once: each
# mkinitramfs is a minute of emulation in a foreign-arch build).
# - conf.d/vmdock: only the listed modules, zstd;
# - modules.d/vmdock: the list (outside /etc/initramfs-tools/modules, a
#   conffile dpkg would ask about);
# - hooks/vmdock-trim: drops what the guest's initramfs never reads.
set -euo pipefail
root=$1
here=$(cd "$(dirname "$0")/.." && pwd)
install -D -m 0644 "$here/overlay/etc/initramfs-tools/conf.d/vmdock" "$root/etc/initramfs-tools/conf.d/vmdock"
install -D -m 0755 "$here/overlay/etc/initramfs-tools/hooks/vmdock-trim" "$root/etc/initramfs-tools/hooks/vmdock-trim"
install -D -m 0644 "$here/files/initramfs-modules" "$root/usr/share/initramfs-tools/modules.d/vmdock"
