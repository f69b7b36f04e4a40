#!/usr/bin/env bash
# Writes DIR/images.json for the release's images in DIR (both arches),
# checked as vmdock checks a download, and hands its sha256 to the jobs
# that build the binaries (GITHUB_OUTPUT manifest-sha256=...).
#
# usage: hack/ci/release-manifest.sh DIR TAG
set -euo pipefail
cd "$(dirname "$0")/../.."

dir=${1:?usage: $0 DIR TAG}
tag=${2:?usage: $0 DIR TAG}

go run ./hack/release --dir "$dir" --version "$tag" --arch amd64,arm64
sum=$(sha256sum "$dir/images.json" | cut -d' ' -f1)
echo "images.json sha256 $sum"
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  echo "manifest-sha256=$sum" >>"$GITHUB_OUTPUT"
fi
