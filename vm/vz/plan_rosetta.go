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
