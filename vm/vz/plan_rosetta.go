package vz

import (
	"errors"
	"fmt"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/macos"
)

// RosettaPlan is the Rosetta share.
type RosettaPlan struct {
	Tag string // virtiofs tag; empty: no Rosetta share

	// CachingSocket is the abstract socket name through which Rosetta in
	// the guest reaches rosettad, the daemon that keeps translated code
	// between runs (macOS 14+); empty: no caching. The guest agent starts
	// rosettad from the share; it learns the name from the share itself.
	CachingSocket string
}

// rosettaCachingSocket is the abstract socket name handed to vz. Abstract
// sockets belong to a network namespace: Rosetta in the guest's own
// namespace (the agent, `vmdock ssh`, containers run with --network host)
// finds the cache; a container on its own network runs uncached, as fast
// as before.
const rosettaCachingSocket = "vmdock-rosettad"

var (
	errRosettaNotInstalled = errors.New("vz: Rosetta is not installed; run `softwareupdate --install-rosetta` or start from a terminal to be asked")
	errRosettaUnsupported  = errors.New("vz: Rosetta for Linux is not supported on this Mac; start without --vz-rosetta")
)

func planRosetta(host HostInfo, ver macos.Version) (RosettaPlan, error) {
	if host.Arch != driver.ArchARM64 {
		return RosettaPlan{}, fmt.Errorf("vz: Rosetta needs an Apple silicon (arm64) host, this host is %s", host.Arch)
	}
	switch host.Rosetta {
	case RosettaInstalled:
	case RosettaNotInstalled:
		return RosettaPlan{}, errRosettaNotInstalled
	default:
		return RosettaPlan{}, errRosettaUnsupported
	}
	p := RosettaPlan{Tag: agent.RosettaTag}
	if !ver.Less(macos.MinRosettaCaching) {
		p.CachingSocket = rosettaCachingSocket
	}
	return p, nil
}

// errCachingNotBuiltIn marks a caching setup vz refused because this binary
// was built against an SDK older than macOS 14 (vz's
// ErrBuildTargetOSVersion): the running macOS has the cache, the binary
// cannot ask for it.
var errCachingNotBuiltIn = errors.New("this vmdock was built with an SDK older than macOS 14")

// rosettaCaching turns on the plan's translation cache through set. A
// binary that cannot (errCachingNotBuiltIn) still boots: the share runs
// uncached, and the returned warning says why amd64 programs start slower.
// Any other failure fails the start.
func rosettaCaching(r RosettaPlan, set func(socket string) error) (warning string, err error) {
	if r.CachingSocket == "" {
		return "", nil
	}
	err = set(r.CachingSocket)
	switch {
	case err == nil:
		return "", nil
	case errors.Is(err, errCachingNotBuiltIn):
		return fmt.Sprintf("vz: Rosetta runs without its translation cache, so amd64 programs start slower: %v; a build with the macOS 14 SDK or newer (Xcode 15+) caches", err), nil
	}
	return "", fmt.Errorf("vz: rosetta caching socket %q: %w", r.CachingSocket, err)
}
