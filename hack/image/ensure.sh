#!/bin/bash
# Builds the guest image for --arch unless hack/image/out already holds one
# made from the same sources: the stamp beside the image is a hash of the
# contents of every file under hack/image but out/ and the docs, so an image older
# than a change to the build (a package, a tool, a unit file) is rebuilt,
# and a fresh checkout of the same sources is not.
#
# usage: hack/image/ensure.sh --arch amd64|arm64
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
case ${1:-}:${2:-} in
--arch:amd64 | --arch:arm64) arch=$2 ;;
*) echo "usage: $0 --arch amd64|arm64" >&2; exit 2 ;;
esac

image=$here/out/vmdock-$arch.tar.zst
stamp=$here/out/vmdock-$arch.src-hash
want=$(cd "$here" && find . -path ./out -prune -o -type f ! -name '*.md' -print | LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum | cut -d' ' -f1)
if [ -f "$image" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	echo "image $arch: up to date ($image)"
	exit 0
fi
if [ -f "$image" ]; then
	echo "image $arch: its sources changed since it was built; rebuilding"
fi
bash "$here/build.sh" --arch "$arch"
echo "$want" >"$stamp"
