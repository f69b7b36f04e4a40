#!/usr/bin/env bash
# Installs the Debian packages vmdock needs on a Linux host to build its guest
# image and run VMs. Skips apt entirely when everything is already there.
set -euo pipefail
pkgs=(qemu-system-x86 qemu-utils ovmf mmdebstrap e2fsprogs busybox-static zstd socat iproute2 xorriso)
# `deps.sh arm64`: also what booting the arm64 guest on this machine needs.
if [ "${1:-}" = arm64 ]; then pkgs+=(qemu-system-arm); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
