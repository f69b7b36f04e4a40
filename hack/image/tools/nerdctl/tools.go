//go:build tools

// Package tools pins nerdctl for the guest image in a module of its own, so
// its dependency tree stays out of vmdock's go.mod. BuildKit has a module of
// its own next to this one: it needs docker/docker v27 (idtools), nerdctl
// v2.0.5 needs v28. hack/image/build-tools.sh builds both.
package tools

import (
	_ "github.com/containerd/nerdctl/v2/cmd/nerdctl"
)
