#!/usr/bin/env bash
# Makes the tag's draft GitHub release hold the files in DIR (binaries,
# images, images.json) with SHA256SUMS beside them. A failed or repeated run
# is safe to run again: an existing draft is reused and its files replaced.
# A release already published is left alone (its users may have fetched
# its files; a new tag is the way to change them). A person publishes the
# draft after a look; nothing here publishes.
#
# usage: GH_TOKEN=... hack/ci/publish-release.sh DIR TAG
set -euo pipefail

dir=${1:?usage: $0 DIR TAG}
tag=${2:?usage: $0 DIR TAG}
for f in images.json vmdock-amd64.tar.zst vmdock-arm64.tar.zst \
  vmdock-darwin-arm64 vmdock-darwin-amd64 vmdock-linux-amd64 vmdock-linux-arm64; do
  [ -f "$dir/$f" ] || { echo "release file $dir/$f missing" >&2; exit 1; }
done
chmod +x "$dir"/vmdock-darwin-* "$dir"/vmdock-linux-*
(cd "$dir" && rm -f SHA256SUMS && sha256sum -- * >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS && cat SHA256SUMS)

# isDraft of the tag's release: "true", "false", or empty when there is none.
draft=$(gh release view "$tag" --json isDraft --jq .isDraft 2>/dev/null || true)
case $draft in
"")
  gh release create "$tag" --draft --verify-tag --title "$tag" --generate-notes "$dir"/*
  ;;
true)
  echo "release $tag: a draft exists; replacing its files"
  gh release upload "$tag" --clobber "$dir"/*
  ;;
*)
  echo "release $tag is already published: not changing it (push a new tag)" >&2
  exit 1
  ;;
esac
