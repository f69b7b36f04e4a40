//go:build tools

// Package tools pins BuildKit for the guest image. It cannot share
// ../nerdctl's module: nerdctl v2.0.5 needs docker/docker v28.1.1, which
// dropped idtools.LoadIdentityMapping that buildkitd v0.20.2 calls.
package tools

import (
	_ "github.com/moby/buildkit/cmd/buildctl"
	_ "github.com/moby/buildkit/cmd/buildkitd"
)
