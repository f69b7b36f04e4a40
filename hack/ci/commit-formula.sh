#!/usr/bin/env bash
# After a release is published: points Formula/vmdock.rb at the tag's
# source tarball and at the sha256 of the images.json the published
# release serves, and commits that to the default branch checked out here.
# A draft (whose files only people with push access can fetch) is refused.
# Run on a checkout of that branch.
#
# usage: GH_TOKEN=... GH_REPO=OWNER/REPO hack/ci/commit-formula.sh OWNER/REPO TAG BRANCH
set -euo pipefail
cd "$(dirname "$0")/../.."

usage="usage: $0 OWNER/REPO TAG BRANCH"
repo=${1:?$usage}
tag=${2:?$usage}
branch=${3:?$usage}
bash hack/ci/check-tag.sh "$tag"

draft=$(gh release view "$tag" --json isDraft --jq .isDraft) ||
  { echo "release $tag: not found in $repo" >&2; exit 1; }
if [ "$draft" != false ]; then
  echo "release $tag is a draft: publish it first (the formula points only at published releases)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The pin is the digest of what users will download, not of a build's
# output: the published images.json itself.
gh release download "$tag" --pattern images.json --dir "$tmp"
manifest_sha=$(sha256sum "$tmp/images.json" | cut -d' ' -f1)
# The digest Homebrew will check: the tarball GitHub serves for the tag.
curl -fsSL --retry 3 -o "$tmp/source.tar.gz" "https://github.com/$repo/archive/refs/tags/$tag.tar.gz"
tarball_sha=$(sha256sum "$tmp/source.tar.gz" | cut -d' ' -f1)
bash hack/ci/update-formula.sh Formula/vmdock.rb "$repo" "$tag" "$tarball_sha" "$manifest_sha"
if git diff --quiet -- Formula/vmdock.rb; then
  echo "Formula/vmdock.rb already points at $tag"
  exit 0
fi
git config user.name "github-actions[bot]"
git config user.email "41898282+github-actions[bot]@users.noreply.github.com"
git add Formula/vmdock.rb
git commit -m "Formula: vmdock $tag"
git push origin "HEAD:$branch"
