#!/usr/bin/env bash
# Fetches Docker's static macOS docker CLI (the client alone) into DIR and
# prints DIR, for $GITHUB_PATH: the macOS runner images ship no docker CLI,
# and the vz boot's test drives the guest's engine with one.
#
# usage: hack/ci/mac-docker-cli.sh DIR   (DOCKER_CLI_VERSION overrides the pin)
set -euo pipefail

dir=${1:?usage: $0 DIR}
version=${DOCKER_CLI_VERSION:-28.5.2}
case $(uname -m) in
x86_64) arch=x86_64 ;;
arm64) arch=aarch64 ;;
*) echo "mac-docker-cli.sh: no static docker CLI for $(uname -m)" >&2; exit 1 ;;
esac
mkdir -p "$dir"
url="https://download.docker.com/mac/static/stable/$arch/docker-$version.tgz"
curl -fsSL --retry 3 "$url" | tar -xzf - -C "$dir" --strip-components 1 docker/docker
# A file downloaded by curl carries no quarantine flag; clear any anyway.
xattr -c "$dir/docker" 2>/dev/null || true
"$dir/docker" --version >&2
echo "$dir"
