#!/usr/bin/env bash
# On a Mac after `make build`: boots vz from IMAGE (a vmdock-<arch>.tar.zst
# built on Linux) through TestE2EMac, which imports it. The instance's logs
# land in LOGS when it fails.
#
# usage: hack/ci/mac-e2e.sh IMAGE LOGS
set -euo pipefail
cd "$(dirname "$0")/../.."

image=${1:?usage: $0 IMAGE LOGS}
logs=${2:?usage: $0 IMAGE LOGS}
[ -f "$image" ] || { echo "image $image: no such file" >&2; exit 1; }
mkdir -p "$logs"
VMDOCK_E2E_MAC=1 VMDOCK_E2E_MAC_IMAGE="$image" VMDOCK_E2E_LOGS="$logs" \
  go test -tags e2e -v -timeout 60m -run 'TestE2EMac$' ./hack/e2e/
