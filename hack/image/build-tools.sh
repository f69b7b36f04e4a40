#!/bin/bash
# Builds the Go tools that go into the guest image (nerdctl, buildkitd,
# buildctl) as static linux binaries from the pinned module in
# hack/image/tools, and writes their versions next to them. build.sh calls
# it; it also runs on its own (no root needed). nerdctl and BuildKit are two
# modules (tools/nerdctl, tools/buildkit) because they need different
# docker/docker versions.
#
# usage: hack/image/build-tools.sh --arch amd64|arm64 --out DIR
#
# DIR gets nerdctl, buildkitd, buildctl and versions.env. A rerun with the
# same go.mod/go.sum, Go version and flags only checks a stamp.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
arch=
out=

usage() {
	echo "usage: $0 --arch amd64|arm64 --out DIR" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--arch) arch=${2:-}; shift 2 || usage ;;
	--arch=*) arch=${1#*=}; shift ;;
	--out) out=${2:-}; shift 2 || usage ;;
	--out=*) out=${1#*=}; shift ;;
	-h | --help) usage ;;
	*) echo "build-tools.sh: unknown argument '$1' (accepted: --arch amd64|arm64, --out DIR)" >&2; exit 2 ;;
	esac
done
case $arch in
amd64 | arm64) ;;
"") usage ;;
*) echo "build-tools.sh: bad --arch '$arch' (accepted: amd64, arm64)" >&2; exit 2 ;;
esac
[ -n "$out" ] || usage

# build.sh runs as root, often through sudo, whose PATH lacks the Go
# toolchain that .ci/run and a developer shell put first.
go=$(command -v go || true)
[ -n "$go" ] || [ ! -x /usr/local/go/bin/go ] || go=/usr/local/go/bin/go
[ -n "$go" ] || { echo "build-tools.sh: no Go toolchain (go not in PATH nor /usr/local/go/bin)" >&2; exit 1; }

tools=$here/tools
# Versions come from the pinned go.mod files, so the manifest can never
# disagree with what was compiled.
modversion() { # modversion DIR MODULE
	local v
	v=$(awk -v m="$2" '($1 == m && $2 ~ /^v/) || ($1 == "require" && $2 == m) { print ($1 == m ? $2 : $3); exit }' "$tools/$1/go.mod")
	[ -n "$v" ] || { echo "build-tools.sh: no $2 requirement in $tools/$1/go.mod" >&2; exit 1; }
	echo "$v"
}
nerdctl_version=$(modversion nerdctl github.com/containerd/nerdctl/v2)
buildkit_version=$(modversion buildkit github.com/moby/buildkit)
# The proxy's .info for nerdctl v2.0.5 names the tag's commit; BuildKit's
# does not, so buildkitd --version shows no revision.
nerdctl_revision=
[ "$nerdctl_version" != v2.0.5 ] || nerdctl_revision=fb3b8c1b15ea92c588d5afe549361914703a6504

nerdctl_ldflags="-s -w -X github.com/containerd/nerdctl/v2/pkg/version.Version=$nerdctl_version -X github.com/containerd/nerdctl/v2/pkg/version.Revision=$nerdctl_revision"
buildkit_ldflags="-s -w -X github.com/moby/buildkit/version.Version=$buildkit_version -X github.com/moby/buildkit/version.Package=github.com/moby/buildkit"

# GOWORK=off: a go.work further up must not pull vmdock's own module in.
# -mod=readonly: go.sum is committed; a missing entry is an error here, not
# a silent edit (go mod tidy cannot run on tools/nerdctl: nerdctl's tests
# import mod/tigron, which the proxy does not serve). -buildvcs=false: the
# binaries must not depend on the state of vmdock's checkout, and git may
# refuse a clone owned by another user when this runs as root.
goflags="-mod=readonly -buildvcs=false"

mkdir -p "$out"
stamp=$( {
	cat "$tools"/*/go.mod "$tools"/*/go.sum
	"$go" version
	echo "$arch|$goflags|$nerdctl_ldflags|$buildkit_ldflags"
} | sha256sum | cut -d' ' -f1)
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ] &&
	[ -x "$out/nerdctl" ] && [ -x "$out/buildkitd" ] && [ -x "$out/buildctl" ]; then
	echo "build-tools.sh: $out is up to date (nerdctl $nerdctl_version, buildkit $buildkit_version, linux/$arch)"
	exit 0
fi
rm -f "$out/.stamp"

export GOWORK=off GOFLAGS="$goflags" CGO_ENABLED=0 GOOS=linux GOARCH=$arch
build() { # build NAME MODULEDIR PKG LDFLAGS
	local t0
	t0=$(date +%s)
	(cd "$tools/$2" && "$go" build -trimpath -ldflags "$4" -o "$out/$1.tmp" "$3") ||
		{ echo "build-tools.sh: go build of $3 for linux/$arch failed" >&2; exit 1; }
	mv -f "$out/$1.tmp" "$out/$1"
	echo "build-tools.sh: $1 linux/$arch $(($(stat -c %s "$out/$1") / 1024 / 1024)) MiB in $(($(date +%s) - t0)) s"
}
build nerdctl nerdctl github.com/containerd/nerdctl/v2/cmd/nerdctl "$nerdctl_ldflags"
build buildkitd buildkit github.com/moby/buildkit/cmd/buildkitd "$buildkit_ldflags"
build buildctl buildkit github.com/moby/buildkit/cmd/buildctl "$buildkit_ldflags"

printf 'NERDCTL_VERSION=%s\nBUILDKIT_VERSION=%s\n' "$nerdctl_version" "$buildkit_version" >"$out/versions.env"
echo "$stamp" >"$out/.stamp"
