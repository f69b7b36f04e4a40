#!/usr/bin/env bash
# Installs the Debian packages vmdock needs on a Linux host to build, test,
# build its guest image and run VMs (what .ci/run and hack/demo.sh call).
# Skips apt entirely when everything is already there. Go itself is the one
# prerequisite it does not install (CI puts it in /usr/local/go).
#
# usage: hack/deps.sh [arm64]   (arm64: also what boots the arm64 guest here)
set -euo pipefail

# What each package is for:
#   make, git               make build (git describe names the version)
#   qemu-system-x86         qemu-system-x86_64; on Debian 12 also virtiofsd
#   qemu-utils              qemu-img, qemu-io (images, tests)
#   ovmf                    UEFI firmware for bare qcow2/raw images
#   e2fsprogs               mkfs.ext4, e2fsck, dumpe2fs (image build, tests)
#   busybox-static          /bin/busybox for the test container image
#   zstd, tar               image packing and unpacking
#   socat, iproute2, procps socat; ip (loopback aliases, test netns); ps, pgrep
#   xorriso                 cloud-init seed ISO (hack/image/smoke.sh)
#   mmdebstrap              the guest image (hack/image/build.sh installs
#                           what a foreign-arch build needs on top:
#                           arch-test, qemu-user-static, binfmt-support)
#   docker-registry         real TLS registries on loopback (CA certs e2e)
#   tinyproxy               a real HTTP proxy on loopback (proxy e2e)
#   openssh-client          ssh-agent, ssh-keygen (SSH agent forwarding e2e)
#   openssh-server          sshd, started by the remote engine's test with its
#                           own config (never as a service: see below)
#   chromium, libnss3-tools a real browser and certutil (container domains
#                           e2e: pages over http and https, the CA trusted in
#                           a throwaway NSS database)
#   curl                    HTTP/2 over TLS through the domains router
#   docker-compose          a compose project's <service>.<project> name
#   ruby                    the Homebrew formula's test (hack/ci)
#   dnsmasq-base            real DNS servers on loopback (network/usernet's
#                           DNS test; the binary only, no service)
#   libsecret-tools,        secret-tool, and a Secret Service of the test's
#   gnome-keyring,          own on a session bus of its own (the sandbox's
#   dbus-daemon             keychain secrets; internal/keychain/keychaintest)
pkgs=(make git qemu-system-x86 qemu-utils ovmf e2fsprogs busybox-static zstd tar
  socat iproute2 procps xorriso mmdebstrap docker-registry tinyproxy openssh-client
  openssh-server chromium libnss3-tools curl docker-compose ruby dnsmasq-base
  libsecret-tools gnome-keyring dbus-daemon)
if [ "${1:-}" = arm64 ]; then pkgs+=(qemu-system-arm); fi

SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
apt_updated=0
apt_update() {
  if [ $apt_updated = 0 ]; then
    $SUDO apt-get update -qq
    apt_updated=1
  fi
}
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# available PKG: apt has a candidate for PKG on this release.
available() { apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { ok = ($2 != "(none)") } END { exit !ok }'; }

missing=()
for p in "${pkgs[@]}"; do
  installed "$p" || missing+=("$p")
done
# Debian 13 moved virtiofsd out of qemu-system-common into its own package;
# Debian 12 has no such package and ships it with QEMU.
if ! installed virtiofsd && ! [ -x /usr/lib/qemu/virtiofsd ] && ! command -v virtiofsd >/dev/null; then
  apt_update
  if available virtiofsd; then missing+=(virtiofsd); fi
fi
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  apt_update
  # openssh-server's maintainer scripts start sshd as a service; a
  # policy-rc.d that refuses every start keeps it a binary the tests run
  # themselves. One the machine already has is left as it is.
  own_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod 0755 /usr/sbin/policy-rc.d
    own_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [ $own_policy = 1 ]; then $SUDO rm -f /usr/sbin/policy-rc.d; fi
fi

# The docker CLI talks to dockerd inside the VM; no dockerd may run on this
# host as a service (the migrate tests run their own, see below). Debian 13 and later ship the CLI alone as docker-cli. Debian 12
# has it only inside docker.io, whose maintainer scripts enable and start
# dockerd (and which pulls in containerd and runc): there only the CLI
# binary is taken out of Debian's docker.io package (downloaded and checked
# against the signed archive by apt) and installed as /usr/local/bin/docker,
# so no daemon is installed at all. It needs nothing but libc.
install_docker_cli() {
  if available docker-cli; then
    echo "installing: docker-cli"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends docker-cli >/dev/null
    return
  fi
  echo "installing: docker CLI from Debian's docker.io package (without dockerd) as /usr/local/bin/docker"
  local tmp
  tmp=$(mktemp -d)
  # As root, apt-get download drops privileges to _apt, which must be able
  # to write here.
  if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$tmp"; fi
  (cd "$tmp" && apt-get download -qq docker.io)
  local deb=("$tmp"/docker.io_*.deb)
  dpkg-deb --fsys-tarfile "${deb[0]}" | tar -x -C "$tmp" ./usr/bin/docker
  $SUDO install -m 0755 "$tmp/usr/bin/docker" /usr/local/bin/docker
  rm -rf "$tmp"
}
if ! command -v docker >/dev/null; then
  apt_update
  install_docker_cli
  docker --version
fi

# The migrate package's tests run two real docker engines of their own
# (each with its own folders and socket, in its own network namespace,
# started and stopped by the test). Their binaries come out of Debian's
# docker.io, containerd and runc packages the same way, into a folder off
# PATH, so nothing on this host finds or starts a dockerd by itself and no
# maintainer script runs.
TEST_ENGINE_DIR=/usr/local/lib/vmdock-test-engine
install_test_engine() {
  echo "installing: dockerd, containerd, runc from Debian's packages into $TEST_ENGINE_DIR (for the migrate tests)"
  local tmp
  tmp=$(mktemp -d)
  if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$tmp"; fi
  (cd "$tmp" && apt-get download -qq docker.io containerd runc)
  local deb
  for deb in "$tmp"/*.deb; do dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp"; done
  $SUDO install -d "$TEST_ENGINE_DIR"
  $SUDO install -m 0755 "$tmp/usr/sbin/dockerd" "$tmp/usr/sbin/docker-proxy" "$tmp/usr/bin/containerd" \
    "$tmp/usr/bin/containerd-shim-runc-v2" "$tmp/usr/sbin/runc" "$TEST_ENGINE_DIR/"
  rm -rf "$tmp"
}
if ! [ -x "$TEST_ENGINE_DIR/dockerd" ]; then
  apt_update
  install_test_engine
  "$TEST_ENGINE_DIR/dockerd" --version
fi
