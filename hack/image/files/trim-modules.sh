#!/bin/bash
# Deletes kernel module trees a vmdock guest never loads (it only ever sees
# virtio devices). Kept on purpose: 9p, virtiofs, fuse, overlay, bridge,
# veth, netfilter/nf_tables/xt_*/nat/conntrack, vsock, virtio_*, isofs,
# sr_mod/ata (QEMU may attach the cidata ISO as a CD), nfs/cifs (docker
# volumes), btrfs/xfs, wireguard/vxlan/macvlan/ipvlan (docker networks).
set -euo pipefail

k=$1/kernel
[ -d "$k" ] || { echo "trim-modules: no $k" >&2; exit 1; }

for d in \
	drivers/gpu drivers/media drivers/infiniband drivers/staging drivers/isdn \
	drivers/bluetooth drivers/iio drivers/usb drivers/mtd drivers/thunderbolt drivers/nfc \
	drivers/firewire drivers/pcmcia drivers/target drivers/atm drivers/video drivers/hid \
	drivers/leds drivers/w1 drivers/spi drivers/fpga drivers/soundwire drivers/comedi \
	drivers/input/touchscreen drivers/input/joystick drivers/input/tablet drivers/input/misc \
	drivers/net/wireless drivers/net/ethernet drivers/net/usb drivers/net/can drivers/net/wan \
	drivers/net/ieee802154 drivers/net/wwan drivers/net/hamradio drivers/net/fddi drivers/net/arcnet \
	drivers/net/plip drivers/net/slip drivers/net/appletalk drivers/net/dsa drivers/net/phy \
	drivers/net/pcs drivers/net/mdio drivers/net/ipa \
	drivers/platform/chrome drivers/platform/surface drivers/platform/mellanox drivers/platform/x86 \
	drivers/crypto/qat drivers/crypto/ccp drivers/crypto/cavium drivers/crypto/marvell drivers/crypto/hisilicon \
	drivers/mfd drivers/regulator drivers/power/supply drivers/extcon drivers/ntb drivers/most \
	drivers/greybus drivers/counter drivers/ptp drivers/dpll drivers/hwmon drivers/edac drivers/memstick \
	drivers/mmc drivers/mux drivers/phy drivers/pinctrl drivers/rpmsg drivers/remoteproc drivers/slimbus \
	drivers/ssb drivers/bcma drivers/uio drivers/vfio drivers/vdpa drivers/vhost drivers/xen drivers/hv \
	drivers/net/hyperv drivers/net/xen-netback drivers/gnss drivers/android drivers/accessibility \
	arch/x86/kvm sound net/wireless net/mac80211 net/bluetooth net/nfc net/atm net/can net/ieee802154 \
	net/mac802154 net/6lowpan net/appletalk net/x25 net/lapb net/rose net/netrom net/ax25 \
	net/phonet net/caif net/rds net/tipc net/dccp net/rxrpc net/l2tp net/mpls \
	net/9p/trans_xen.ko* net/9p/9pnet_rdma.ko* net/sunrpc/xprtrdma net/smc net/qrtr \
	fs/ocfs2 fs/gfs2 fs/nilfs2 fs/jfs fs/reiserfs fs/ubifs fs/orangefs fs/coda fs/afs fs/dlm \
	fs/ntfs3 fs/hfs fs/hfsplus fs/ufs fs/befs fs/minix fs/omfs fs/qnx4 fs/qnx6 fs/sysv fs/adfs \
	fs/affs fs/efs fs/freevxfs fs/hpfs fs/romfs fs/cramfs fs/erofs fs/f2fs fs/jffs2 fs/gfs2; do
	# shellcheck disable=SC2086 # $d may be a glob
	rm -rf "$k"/$d
done

# drivers/scsi: the vendor HBA drivers live in subdirectories; the
# top-level sd_mod, sr_mod, virtio_scsi and scsi core stay.
find "$k/drivers/scsi" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
# Firmware is for hardware a VM does not have.
rm -rf "$1/../../firmware" 2>/dev/null || true
