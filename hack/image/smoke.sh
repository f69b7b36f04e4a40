#!/bin/bash
# Boots a built vmdock guest image under QEMU (TCG is fine) with a stand-in
# agent on a cidata ISO, and checks that the image's agent unit runs it and
# that Docker works: docker info, docker import, and (when a vmdock-test
# tarball is given) docker load + run + a published port.
#
# usage: hack/image/smoke.sh [--arch amd64|arm64] [--image DIR] [--testimage FILE.tar] [--timeout SECONDS] [--debug]
# --debug forwards the guest's journal to the serial console.
# The VM uses QEMU user networking with restrict=on: it reaches nothing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
arch=amd64
image=
testimage=
timeout=1200
extra=

while [ $# -gt 0 ]; do
	case $1 in
	--arch) arch=$2; shift 2 ;;
	--image) image=$2; shift 2 ;;
	--testimage) testimage=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--debug) extra=" systemd.journald.forward_to_console=1"; shift ;;
	*) echo "smoke.sh: unknown argument '$1' (accepted: --arch, --image, --testimage, --timeout, --debug)" >&2; exit 2 ;;
	esac
done
[ -n "$image" ] || image=$here/out/vmdock-$arch

case $arch in
amd64) qemu=(qemu-system-x86_64 -machine q35 -cpu max) ;;
arm64) qemu=(qemu-system-aarch64 -machine virt -cpu max) ;;
*) echo "smoke.sh: bad --arch '$arch' (accepted: amd64, arm64)" >&2; exit 2 ;;
esac
for f in disk.raw vmlinuz initrd.img manifest.json; do
	[ -f "$image/$f" ] || { echo "smoke.sh: $image/$f missing (run hack/image/build.sh --arch $arch first)" >&2; exit 1; }
done
cmdline=$(sed -n 's/^ *"cmdline": *"\(.*\)",\{0,1\}$/\1/p' "$image/manifest.json")
[ -n "$cmdline" ] || { echo "smoke.sh: no cmdline in $image/manifest.json" >&2; exit 1; }
cmdline+=$extra

run=$(mktemp -d /tmp/vmdock-smoke.XXXXXX)
qpid=
cleanup() {
	[ -z "$qpid" ] || kill "$qpid" 2>/dev/null || true
	rm -rf "$run"
}
trap cleanup EXIT

# The base image stays pristine; the guest writes into a qcow2 overlay.
qemu-img create -q -f qcow2 -b "$image/disk.raw" -F raw "$run/overlay.qcow2"

mkdir "$run/cidata"
echo '{}' >"$run/cidata/agent.json"
if [ -n "$testimage" ]; then
	cp "$testimage" "$run/cidata/vmdock-test.tar"
fi
cat >"$run/cidata/vmdock-agent" <<'AGENT'
#!/bin/sh
# Stand-in for the real agent: proves docker works in this image.
say() { echo "SMOKE: $* (uptime $(cut -d' ' -f1 /proc/uptime))" >/dev/console; }
fail() {
	say "FAIL $*"
	{ systemctl --no-pager status containerd docker; journalctl --no-pager -n 40 -u containerd -u docker; } >/dev/console 2>&1
	say "DIAG END"
	systemctl poweroff
	sleep 600
}
t() { s=$(date +%s.%N); "$@"; rc=$?; dt=$(echo "$(date +%s.%N) $s" | awk '{printf "%.1f", $1-$2}'); return $rc; }

# systemd gives services no HOME; the docker CLI wants one for its config.
export HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin
say "agent started as $(id -un) config=$2"
# No data disk in the smoke test: docker lives on the root disk.
t systemctl start containerd.service docker.service || fail "systemctl start docker"
# Generous: under TCG on a busy host dockerd can take minutes.
deadline=$(($(date +%s) + 600))
until docker info >/tmp/info.err 2>&1; do
	[ "$(date +%s)" -lt $deadline ] || fail "docker info failing for 600s: $(tail -n 3 /tmp/info.err)"
	sleep 2
done
t docker info --format '{{.ServerVersion}} storage={{.Driver}} cgroup={{.CgroupVersion}} runtime={{.DefaultRuntime}}' >/tmp/info 2>&1 || fail "docker info: $(cat /tmp/info)"
say "docker info OK $(cat /tmp/info) (${dt}s)"

mkdir -p /tmp/tiny && echo hello >/tmp/tiny/hello && tar -C /tmp/tiny -cf /tmp/tiny.tar .
t docker import /tmp/tiny.tar smoke:tiny >/tmp/imp 2>&1 || fail "docker import: $(cat /tmp/imp)"
say "docker import OK $(cut -c1-19 /tmp/imp) (${dt}s)"

if [ -f /run/vmdock/cidata/vmdock-test.tar ]; then
	t docker load -i /run/vmdock/cidata/vmdock-test.tar >/tmp/load 2>&1 || fail "docker load: $(cat /tmp/load)"
	say "docker load OK $(cat /tmp/load) (${dt}s)"
	t docker run --rm vmdock-test:latest sh -c 'echo run-ok from $(uname -m)' >/tmp/run 2>&1 || fail "docker run: $(cat /tmp/run)"
	say "docker run OK $(cat /tmp/run) (${dt}s)"
	t docker run -d --name echo -p 8080:80 vmdock-test:latest >/tmp/d 2>&1 || fail "docker run -d -p: $(cat /tmp/d)"
	say "docker run -d -p 8080:80 OK (${dt}s)"
	i=0
	until t docker run --rm --network host vmdock-test:latest wget -qO- http://127.0.0.1:8080/ >/tmp/w 2>&1 && grep -q vmdock-test-ok /tmp/w; do
		i=$((i + 1)); [ $i -lt 5 ] || fail "published port: $(cat /tmp/w)"; sleep 1
	done
	say "published port OK $(cat /tmp/w) (${dt}s)"
fi
say "DONE"
systemctl poweroff
AGENT
chmod 0755 "$run/cidata/vmdock-agent"
# Same tool and flags as the real boot disk would use (ISO9660 + Joliet + RR).
xorriso -as mkisofs -quiet -V cidata -J -R -o "$run/cidata.iso" "$run/cidata"

start=$(date +%s.%N)
elapsed() { echo "$(date +%s.%N) $start" | awk '{printf "%6.1f", $1-$2}'; }
"${qemu[@]}" -accel tcg,thread=multi -smp 2 -m 2048 \
	-nodefaults -no-user-config -display none -vga none -no-reboot \
	-kernel "$image/vmlinuz" -initrd "$image/initrd.img" -append "$cmdline" \
	-drive "file=$run/overlay.qcow2,format=qcow2,if=virtio,cache=writeback,discard=unmap" \
	-drive "file=$run/cidata.iso,format=raw,if=virtio,readonly=on" \
	-netdev user,id=n0,restrict=on -device virtio-net-pci,netdev=n0 \
	-serial "file:$run/serial.log" -monitor none &
qpid=$!

echo "smoke: booting $image ($arch), cmdline: $cmdline"
seen=0
result=timeout
while :; do
	if [ -f "$run/serial.log" ]; then
		n=$(wc -l <"$run/serial.log")
		if [ "$n" -gt "$seen" ]; then
			sed -n "$((seen + 1)),${n}p" "$run/serial.log" | while IFS= read -r l; do
				case $l in
				*"Linux version"* | *"Run /init"* | *"Welcome to"* | *"Reached target"*"Multi-User"* | *SMOKE:* | *vmdock-agent*)
					echo "[$(elapsed)s] ${l%$'\r'}" ;;
				esac
			done
			seen=$n
		fi
		if grep -q 'SMOKE: DIAG END' "$run/serial.log"; then result=fail; break; fi
		if grep -q 'SMOKE: DONE' "$run/serial.log"; then result=ok; break; fi
	fi
	if ! kill -0 "$qpid" 2>/dev/null; then result=exited; break; fi
	if [ "$(elapsed | cut -d. -f1)" -ge "$timeout" ]; then break; fi
	sleep 1
done

# Let the guest power off by itself, then make sure qemu is gone.
for _ in $(seq 60); do kill -0 "$qpid" 2>/dev/null || break; sleep 1; done
kill "$qpid" 2>/dev/null || true
wait "$qpid" 2>/dev/null || true
qpid=
cp "$run/serial.log" "$here/out/smoke-$arch.serial.log" 2>/dev/null || true

echo "smoke: result=$result after $(elapsed)s (serial log: $here/out/smoke-$arch.serial.log)"
[ "$result" = ok ]
