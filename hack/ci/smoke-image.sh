#!/usr/bin/env bash
# Boots the ARCH image hack/ci/build-image.sh just built (hack/image/out)
# under QEMU with hack/image/smoke.sh, loading and running the test
# container image it left in OUT: a release attaches only an image that
# booted and ran a container.
#
# usage: hack/ci/smoke-image.sh amd64|arm64 OUT
set -euo pipefail
cd "$(dirname "$0")/../.."

case ${1:-} in
amd64) deps=() ;;
arm64) deps=(arm64) ;;
*) echo "usage: $0 amd64|arm64 OUT (got arch '${1:-}')" >&2; exit 2 ;;
esac
arch=$1
out=${2:?usage: $0 amd64|arm64 OUT}
bash hack/deps.sh "${deps[@]}"
bash hack/image/smoke.sh --arch "$arch" --image "hack/image/out/vmdock-$arch" --testimage "$out/vmdock-test-$arch.tar"
