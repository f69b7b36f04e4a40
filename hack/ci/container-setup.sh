#!/usr/bin/env bash
# Prepares a Debian CI container after checkout: git trusts the checkout
# (the workspace belongs to the runner's user, the container runs as root)
# and Go is on PATH where .ci/run, the Makefile and the image build expect
# it. Safe to run again (hack/ci/wfrun runs it on a machine each CI run).
#
# usage: hack/ci/container-setup.sh
set -euo pipefail

ws=${GITHUB_WORKSPACE:-$PWD}
git config --global --get-all safe.directory 2>/dev/null | grep -qxF -- "$ws" ||
  git config --global --add safe.directory "$ws"
# actions/setup-go put go on this step's PATH; .ci/run, the Makefile and
# hack/image/build-tools.sh look in /usr/local/go/bin.
if ! [ -x /usr/local/go/bin/go ]; then
  goroot=$(go env GOROOT)
  ln -sfn "$goroot" /usr/local/go
fi
/usr/local/go/bin/go version
