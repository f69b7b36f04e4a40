#!/usr/bin/env bash
# Points Formula/vmdock.rb at a release: homepage and head at REPO, url at
# the tag's source tarball, sha256 its digest, image_manifest_sha256 the
# release's images.json digest. Refuses malformed values and checks every
# line was rewritten.
#
# usage: hack/ci/update-formula.sh FORMULA OWNER/REPO TAG TARBALL_SHA256 MANIFEST_SHA256
set -euo pipefail

usage="usage: $0 FORMULA OWNER/REPO TAG TARBALL_SHA256 MANIFEST_SHA256"
formula=${1:?$usage}
repo=${2:?$usage}
tag=${3:?$usage}
tarball_sha=${4:?$usage}
manifest_sha=${5:?$usage}

[[ "$repo" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] || { echo "repository '$repo': want OWNER/REPO" >&2; exit 2; }
bash "$(dirname "$0")/check-tag.sh" "$tag"
for v in "$tarball_sha" "$manifest_sha"; do
  [[ "$v" =~ ^[0-9a-f]{64}$ ]] || { echo "digest '$v': want 64 lower-case hex digits" >&2; exit 2; }
done

home="https://github.com/$repo"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
sed -E \
  -e "s|^  homepage \".*\"$|  homepage \"$home\"|" \
  -e "s|^  url \".*\"$|  url \"$home/archive/refs/tags/$tag.tar.gz\"|" \
  -e "s|^  sha256 \"[0-9a-f]*\"$|  sha256 \"$tarball_sha\"|" \
  -e "s|^  head \"[^\"]*\"|  head \"$home.git\"|" \
  -e "/def image_manifest_sha256/,/end/ s|\"[0-9a-f]{64}\"|\"$manifest_sha\"|" \
  "$formula" >"$tmp"

for want in "  homepage \"$home\"" "  url \"$home/archive/refs/tags/$tag.tar.gz\"" "  sha256 \"$tarball_sha\"" \
  "  head \"$home.git\"" "    \"$manifest_sha\""; do
  grep -qxF -- "$want" "$tmp" || grep -qF -- "$want," "$tmp" || { echo "$formula: no line became: $want" >&2; exit 1; }
done
cat "$tmp" >"$formula"
echo "$formula: $tag of $repo"
