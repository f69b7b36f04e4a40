//go:build darwin && cgo && amd64

package vz

import (
	"errors"

	vz "github.com/Code-Hex/vz/v3"
)

const hostArch = "amd64"

// Rosetta for Linux exists only on Apple silicon; Plan refuses it on
// Intel hosts before rosettaShare could be reached.
func rosettaAvailability() RosettaAvailability { return RosettaUnsupported }

func currentRosettaHost() rosettaHost { return rosettaHost{availability: rosettaAvailability} }

func rosettaShare(RosettaPlan) (vz.DirectorySharingDeviceConfiguration, error) {
	return nil, errors.New("vz: Rosetta needs an Apple silicon (arm64) host")
}
