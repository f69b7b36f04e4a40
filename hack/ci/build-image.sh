#!/usr/bin/env bash
# Builds one arch's guest image on a Debian CI machine (root, a privileged
# container, Go set up by the job) and puts it in OUT for upload, with the
# vmdock-test container image tarball the end-to-end tests load (built
# here from Debian's static busybox: a Mac has none to build it from).
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
# A hard link where it can be one: the archive is hundreds of MB, and
# ensure.sh replaces hack/image/out's file rather than writing into it.
ln -f "hack/image/out/vmdock-$arch.tar.zst" "$out/" 2>/dev/null || cp "hack/image/out/vmdock-$arch.tar.zst" "$out/"
go run ./hack/testimage --arch "$arch" --out "$out/vmdock-test-$arch.tar"
ls -l "$out/vmdock-$arch.tar.zst" "$out/vmdock-test-$arch.tar"
