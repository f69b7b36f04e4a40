#!/usr/bin/env bash
# The main job on a fresh Linux machine: install what is needed, build vmdock
# and its guest image, start a VM with Docker (isolated network: nothing
# leaves this machine), load a container image built locally and run it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/deps.sh
make build
[ -f hack/image/out/vmdock-amd64.tar.zst ] || make image
go run ./hack/testimage --arch amd64 --out /tmp/vmdock-test.tar
./bin/vmdock start --network-mode isolated
docker --context vmdock load -i /tmp/vmdock-test.tar
docker --context vmdock run --rm vmdock-test:latest /bin/busybox echo "hello from a container in the vmdock VM"
./bin/vmdock status
echo "Docker is ready: 'docker --context vmdock ...' (or the current context). Stop it with: ./bin/vmdock stop"
