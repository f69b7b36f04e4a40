#!/usr/bin/env bash
# On a Mac after `make build`: `vmdock doctor --json` must say the binary is
# signed with the virtualization entitlement and built with cgo, and that
# Rosetta is ok or a warning (a CI Mac may not have it installed). The os
# row may fail: GitHub's Apple silicon runners are VMs without nested
# virtualization, where Virtualization.framework runs no VM and doctor
# says so. Other checks (QEMU, an instance) may fail on a CI Mac and are
# printed only.
#
# usage: hack/ci/mac-doctor.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

report=$(mktemp)
trap 'rm -f "$report"' EXIT
rc=0
bin/vmdock doctor --json >"$report" || rc=$?
# 1 is "a check failed", judged below; anything else is doctor failing.
if [ "$rc" != 0 ] && [ "$rc" != 1 ]; then
  cat "$report"
  echo "vmdock doctor --json exited $rc" >&2
  exit 1
fi
cat "$report"
go run ./hack/ci/doctorcheck os=ok,fail signature=ok cgo=ok rosetta=ok,warn <"$report"
