#!/usr/bin/env bash
# Refuses a release tag the rest of the chain would refuse later: the
# Homebrew formula's version and URL need v<major>.<minor>.<patch> with an
# optional suffix (v1.2.3, v1.2.3-rc.1). release.yml's tag filter is
# looser (a glob); this runs first so a bad tag fails in seconds, before
# any image is built. update-formula.sh calls it too.
#
# usage: hack/ci/check-tag.sh TAG
set -euo pipefail

tag=${1:-}
[[ "$tag" =~ ^v[0-9]+\.[0-9]+\.[0-9]+([-+][A-Za-z0-9.+-]*)?$ ]] ||
  { echo "tag '$tag': want v<major>.<minor>.<patch>, optionally with a -suffix (v1.2.3, v1.2.3-rc.1)" >&2; exit 2; }
