#!/usr/bin/env bash
# Builds one arch's guest image on a Debian CI machine (root, a privileged
# container) and puts it in OUT for upload.
#
# usage: hack/ci/build-image.sh amd64|arm64 OUT
set -euo pipefail
cd "$(dirname "$0")/../.."

case ${1:-} in
amd64 | arm64) arch=$1 ;;
*) echo "usage: $0 amd64|arm64 OUT (got arch '${1:-}')" >&2; exit 2 ;;
esac
out=${2:?usage: $0 amd64|arm64 OUT}

bash hack/deps.sh
bash hack/image/ensure.sh --arch "$arch"
mkdir -p "$out"
cp "hack/image/out/vmdock-$arch.tar.zst" "$out/"
ls -l "$out/vmdock-$arch.tar.zst"
