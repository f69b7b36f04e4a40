#!/usr/bin/env bash
# On a Mac after `make build`: boots vz from IMAGE (a vmdock-<arch>.tar.zst
# built on Linux) through TestE2EMac, which imports it and loads TESTIMAGE
# (the vmdock-test container image tarball the same Linux job built: a Mac
# has no static busybox to build it from). The instance's logs land in LOGS
# when it fails.
#
# usage: hack/ci/mac-e2e.sh IMAGE TESTIMAGE LOGS
set -euo pipefail
cd "$(dirname "$0")/../.."

usage="usage: $0 IMAGE TESTIMAGE LOGS"
image=${1:?$usage}
testimage=${2:?$usage}
logs=${3:?$usage}
for f in "$image" "$testimage"; do
  [ -f "$f" ] || { echo "$f: no such file" >&2; exit 1; }
done
command -v docker >/dev/null || { echo "no docker CLI on PATH (hack/ci/mac-docker-cli.sh fetches one)" >&2; exit 1; }
mkdir -p "$logs"
VMDOCK_E2E_MAC=1 VMDOCK_E2E_MAC_IMAGE="$image" VMDOCK_E2E_TESTIMAGE="$testimage" VMDOCK_E2E_LOGS="$logs" \
  go test -tags e2e -v -timeout 100m -run 'TestE2EMac$' ./hack/e2e/
