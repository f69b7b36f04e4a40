#!/usr/bin/env bash
# Prepares a Debian CI container after checkout: git trusts the checkout
# (the workspace belongs to the runner's user, the container runs as root)
# and Go is on PATH where .ci/run expects it.
#
# usage: hack/ci/container-setup.sh
set -euo pipefail

git config --global --add safe.directory "${GITHUB_WORKSPACE:-$PWD}"
# actions/setup-go put go on this step's PATH; .ci/run and the Makefile
# look in /usr/local/go/bin.
if ! [ -x /usr/local/go/bin/go ]; then
  goroot=$(go env GOROOT)
  ln -sfn "$goroot" /usr/local/go
fi
/usr/local/go/bin/go version
