#!/usr/bin/env bash
# After a release: points Formula/vmdock.rb at the tag's source tarball and
# the release's images.json digest, and commits that to the default branch
# checked out here. Run on a checkout of that branch.
#
# usage: GH_TOKEN=... hack/ci/commit-formula.sh OWNER/REPO TAG MANIFEST_SHA256 BRANCH
set -euo pipefail
cd "$(dirname "$0")/../.."

repo=${1:?usage: $0 OWNER/REPO TAG MANIFEST_SHA256 BRANCH}
tag=${2:?usage: $0 OWNER/REPO TAG MANIFEST_SHA256 BRANCH}
manifest_sha=${3:?usage: $0 OWNER/REPO TAG MANIFEST_SHA256 BRANCH}
branch=${4:?usage: $0 OWNER/REPO TAG MANIFEST_SHA256 BRANCH}

# The digest Homebrew will check: the tarball GitHub serves for the tag.
tarball_sha=$(curl -fsSL --retry 3 "https://github.com/$repo/archive/refs/tags/$tag.tar.gz" | sha256sum | cut -d' ' -f1)
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
