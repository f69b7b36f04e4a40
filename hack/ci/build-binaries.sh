#!/usr/bin/env bash
# Builds the release's vmdock binaries for this OS, amd64 and arm64, into
# OUT as vmdock-<os>-<arch>. On a Mac they are built with cgo (vz) and
# signed ad hoc with hack/vz.entitlements by `make build`; on Linux they
# are static. VERSION, IMAGE_BASE_URL and IMAGE_MANIFEST_SHA256 come from
# the environment and are required: a release binary without its images'
# URL and pin would boot whatever that URL serves.
#
# usage: VERSION=v1.2.3 IMAGE_BASE_URL=... IMAGE_MANIFEST_SHA256=... hack/ci/build-binaries.sh OUT
set -euo pipefail
cd "$(dirname "$0")/../.."

out=${1:?usage: $0 OUT}
: "${VERSION:?set VERSION (the tag)}"
: "${IMAGE_BASE_URL:?set IMAGE_BASE_URL (the release download URL)}"
if ! [[ "${IMAGE_MANIFEST_SHA256:-}" =~ ^[0-9a-f]{64}$ ]]; then
  echo "IMAGE_MANIFEST_SHA256 '${IMAGE_MANIFEST_SHA256:-}': want the 64 hex digits of images.json's sha256" >&2
  exit 2
fi

os=$(uname -s | tr '[:upper:]' '[:lower:]')
mkdir -p "$out"
# Linux binaries run on any distribution: no libc to match.
if [ "$os" = linux ]; then export CGO_ENABLED=0; fi
for arch in amd64 arm64; do
  make build BIN_ARCH="$arch" VERSION="$VERSION" IMAGE_BASE_URL="$IMAGE_BASE_URL" IMAGE_MANIFEST_SHA256="$IMAGE_MANIFEST_SHA256"
  cp bin/vmdock "$out/vmdock-$os-$arch"
  file "$out/vmdock-$os-$arch" || true
done
if [ "$os" = darwin ]; then
  for arch in amd64 arm64; do
    codesign -d --entitlements - "$out/vmdock-$os-$arch" 2>&1 | grep -q com.apple.security.virtualization ||
      { echo "$out/vmdock-$os-$arch lacks the virtualization entitlement" >&2; exit 1; }
  done
fi
# The one this machine runs says what it embeds.
"$out/vmdock-$os-$(go env GOARCH)" version
