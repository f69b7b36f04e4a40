#!/bin/sh
# Regenerates the instance folder fixtures: each formatN/ here is made by
# gen/formatN/main.go built inside a worktree of the last commit that
# wrote format N, with that commit's own writers (see README.md).
# Run from anywhere in the repository: sh vm/layout/testdata/gen.sh
set -eu
top=$(git rev-parse --show-toplevel)
here=$top/vm/layout/testdata
tmp=$(mktemp -d)
trap 'for w in "$tmp"/wt*; do [ -d "$w" ] && git -C "$top" worktree remove --force "$w"; done; rm -rf "$tmp"' EXIT
gen() { # format commit
	n=$1 commit=$2 wt=$tmp/wt$1
	git -C "$top" worktree add --detach "$wt" "$commit" >/dev/null
	mkdir -p "$wt/hack/genfixture"
	cp "$here/gen/format$n/main.go" "$wt/hack/genfixture/main.go"
	rm -rf "$here/format$n"
	# A fixed home: the config's mount of ~ is saved as an absolute path.
	(cd "$wt" && HOME=/home/fixture go run ./hack/genfixture "$here/format$n" "$(git rev-parse --short=7 HEAD)")
	rm -f "$here/format$n/default/lock"
	echo "format $n: $(git -C "$top" log -1 --format='%h %s' "$commit" | cut -c1-100)"
}
gen 1 40d1894^
gen 2 175451e^
gen 3 084bb9f
