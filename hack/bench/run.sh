#!/usr/bin/env bash
# make bench: boot a throwaway instance (isolated network, a 9p and a
# virtiofs share in their default and their other cache mode (the
# virtiofs one with an excluded folder), a sync
# mount), run every `vmdock bench` section but boot, then the api and ports
# sections on a containerd instance (sync compares
# the --disk-sync modes on scratch disks hot-plugged into this one VM),
# stop, boot the same VM spec with the QEMU driver alone as the boot
# baseline, start once more for the boot section, stop, and print the
# merged table. The remote section runs with no VM up, against a remote
# instance on sshd and dockerd in network namespaces (make bench-remote;
# root only).
#
# The container-domains router listens on two free loopback ports of 1024
# or above (not 80/443, which may be taken, or refused to a normal user),
# set in the template and in every existing profile's config.
#
# Env: BENCH_FULL=1 for the full workloads (20000 files; slow under TCG),
#      BENCH_SECTIONS=domains,ports (say) to run only these sections on the
#      docker instance and skip the rest (containerd, resume, remote, boot);
#      BENCH_SECTIONS=remote runs the remote part alone, no VM,
#      BENCH_OUT (default bin/bench), VMDOCK_HOME, DOCKER_CONFIG.
set -euo pipefail
cd "$(dirname "$0")/../.."

export VMDOCK_HOME=${VMDOCK_HOME:-/tmp/vmdock-bench}   # short: unix socket paths
export DOCKER_CONFIG=${DOCKER_CONFIG:-/tmp/vmdock-bench-docker}
out=${BENCH_OUT:-bin/bench}
quick=--quick
[[ ${BENCH_FULL:-0} == 1 ]] && quick=
arch=$(go env GOARCH)
vmdock=./bin/vmdock
share9p=$VMDOCK_HOME-9p
sharevfs=$VMDOCK_HOME-virtiofs
syncdir=$VMDOCK_HOME-sync
# The other cache mode of each share type, side by side with the default.
share9ploose=$VMDOCK_HOME-9p-loose
sharevfsalways=$VMDOCK_HOME-virtiofs-always

stamp() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }

# bench_remote runs the remote section (make bench-remote) and adds its
# rows to $out/bench.json; without root it says so and the rows are missing.
bench_remote() {
	if [[ $(id -u) != 0 ]]; then
		stamp "remote: needs root (network namespaces, sshd, dockerd); its rows are missing"
		return 0
	fi
	stamp "bench: remote (sshd and dockerd in a network namespace, no VM)"
	VMDOCK_REMOTE_BENCH_OUT=$(realpath "$out") make --no-print-directory bench-remote >"$out/remote.log" 2>&1 ||
		stamp "remote bench failed ($out/remote.log); its rows are missing"
}

# free_port prints a loopback TCP port from $1 up that nothing answers on.
free_port() {
	local p=$1
	while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do
		p=$((p + 1))
	done
	echo "$p"
}

# Two VMs on two cores would measure each other.
if pgrep -f "qemu-system-$(uname -m) " >/dev/null; then
	echo "bench: another qemu VM is running; stop it first (numbers would be meaningless)" >&2
	exit 1
fi

stamp "building the guest helper"
CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath -ldflags "-s -w" \
	-o "bin/vmdock-bench-helper-linux-$arch" ./hack/bench/helper

mkdir -p "$VMDOCK_HOME" "$DOCKER_CONFIG" "$share9p" "$sharevfs" "$syncdir" "$share9ploose" "$sharevfsalways" "$out"
rm -f "$out/bench.json" "$out/remote.txt"
if [[ ${BENCH_SECTIONS:-} == remote ]]; then
	bench_remote
	stamp "done: $out/bench.json, $out/remote.txt"
	cat "$out/remote.txt" 2>/dev/null || true
	exit 0
fi
httpport=$(free_port $((18080 + RANDOM % 1000)))
httpsport=$(free_port $((httpport + 1)))
# dnsPort 0: no DNS responder, which the bench does not use.
domains="domains: {enabled: true, httpPort: $httpport, httpsPort: $httpsport, dnsPort: 0}"
stamp "container domains on 127.0.0.1:$httpport (http), :$httpsport (https)"
# Profiles of an earlier run keep their saved config: their domains
# section is replaced (a top-level block, up to the next top-level key).
for cfg in "$VMDOCK_HOME"/*/vmdock.yaml; do
	[[ -f $cfg ]] || continue
	awk '/^domains:/ {skip = 1; next} skip && /^[^ \t#-]/ {skip = 0} !skip' "$cfg" >"$cfg.tmp"
	echo "$domains" >>"$cfg.tmp"
	mv "$cfg.tmp" "$cfg"
done
# New instances start from the template; decoded over the defaults.
cat >"$VMDOCK_HOME/template.yaml" <<YAML
network:
  mode: isolated
diskSync: fsync
mounts:
  - {location: $share9p, writable: true, type: 9p}
  - {location: $sharevfs, writable: true, type: virtiofs, exclude: [vendor]}
  - {location: $share9ploose, writable: true, type: 9p, cache: loose}
  - {location: $sharevfsalways, writable: true, type: virtiofs, cache: always}
  - {location: $syncdir, writable: true, mode: sync}
$domains
YAML

started=0
cleanup() {
	if [[ $started == 1 ]]; then
		stamp "stopping the instance"
		"$vmdock" stop || "$vmdock" stop --force || true
	fi
}
trap cleanup EXIT

start() {
	stamp "starting the instance"
	started=1
	"$vmdock" start --network-mode isolated
}

start
# Docker contexts talk to the instance's socket directly.
if [[ -f /tmp/vmdock-test.tar ]] || go run ./hack/testimage --arch "$arch" --out /tmp/vmdock-test.tar; then
	docker --context vmdock load -i /tmp/vmdock-test.tar >/dev/null 2>&1 || stamp "test image load failed (not needed by bench)"
fi

if [[ -n ${BENCH_SECTIONS:-} ]]; then
	stamp "bench: $BENCH_SECTIONS only"
	"$vmdock" bench $quick --sections "$BENCH_SECTIONS" --append "$out/bench.json" >"$out/table.txt"
	"$vmdock" stop
	started=0
	stamp "done: $out/bench.json, $out/table.txt"
	echo
	cat "$out/table.txt"
	exit 0
fi

stamp "bench: all sections but boot (cost last: its paused row is the first pause of this boot)"
"$vmdock" bench $quick --sections disk,tree,propagate,ports,api,domains,memory,sync,cost --append "$out/bench.json"
"$vmdock" stop
started=0

# The containerd runtime beside docker: its own instance (the runtime is
# fixed per data disk), the api and ports sections only.
stamp "containerd: starting profile ctr"
if "$vmdock" start -p ctr --runtime containerd --network-mode isolated -V "$share9p:rw"; then
	"$vmdock" nerdctl -p ctr -- load </tmp/vmdock-test.tar >/dev/null 2>&1 || stamp "containerd: test image load failed (nerdctl -p is then skipped)"
	stamp "bench: containerd api, ports"
	"$vmdock" bench -p ctr $quick --sections api,ports --append "$out/bench.json" || stamp "containerd bench failed"
	"$vmdock" stop -p ctr || "$vmdock" stop -p ctr --force || true
else
	stamp "containerd: start failed; its rows are missing"
	"$vmdock" stop -p ctr --force >/dev/null 2>&1 || true
fi
# Fast start: a profile whose stop can save the VM (a sync mount, no share:
# QEMU cannot save a VM with a mounted 9p or virtiofs share). Its first
# boot makes the disks; then a cold start against a resume, side by side.
stamp "resume: creating profile res"
if "$vmdock" start -p res --network-mode isolated -V "$syncdir:sync" >/dev/null && "$vmdock" stop -p res --no-save >/dev/null; then
	stamp "bench: resume cycle (cold start, save, resume, power off)"
	"$vmdock" bench -p res --resume-cycle --append "$out/bench.json" || stamp "resume cycle failed; its rows are missing"
else
	stamp "resume: start failed; its rows are missing"
fi
"$vmdock" stop -p res --force >/dev/null 2>&1 || true
# No VM runs now: the remote section's ssh, sshd and dockerd have the cores.
bench_remote
# The boot baseline: the same VM spec booted by the QEMU driver alone, then
# one more vmdock start whose steps up to the same agent hello compare.
stamp "bench: boot baseline (qemu alone)"
"$vmdock" bench --raw-boot --append "$out/bench.json"
start
stamp "bench: boot"
"$vmdock" bench --sections boot --append "$out/bench.json" --svg "$out/bench.svg" >"$out/table.txt"
"$vmdock" stop
started=0
stamp "done: $out/bench.json, $out/bench.svg, $out/table.txt"
echo
cat "$out/table.txt"
