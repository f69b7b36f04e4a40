package vz

import (
	"errors"
	"fmt"
)

// rosettaHost is what offering the Rosetta install needs from the Mac; each
// build fills it (rosetta_darwin_*.go, rosetta_unavailable.go) and tests
// script it.
type rosettaHost struct {
	availability func() RosettaAvailability // nil: this build has no vz at all
	install      func() error               // vz.LinuxRosettaDirectoryShareInstallRosetta
}

// OfferRosettaInstall runs before a --vz-rosetta start hands over to the
// host agent, which has no terminal to ask on. With Rosetta installed it
// does nothing; otherwise, when interactive (stdin and stderr are a
// terminal) it asks through confirm and installs, and without a terminal
// it returns the one-line error the host agent would.
func OfferRosettaInstall(interactive bool, confirm func(question string) (bool, error)) error {
	return currentRosettaHost().offer(interactive, confirm)
}

const rosettaQuestion = "Rosetta is not installed, and --vz-rosetta needs it. Install it now (macOS may ask you to accept its license)? [y/N] "

func (h rosettaHost) offer(interactive bool, confirm func(string) (bool, error)) error {
	if h.availability == nil {
		return nil // the driver itself reports why vz cannot run here
	}
	switch h.availability() {
	case RosettaInstalled:
		return nil
	case RosettaNotInstalled:
	default:
		return errRosettaUnsupported
	}
	if !interactive {
		return errRosettaNotInstalled
	}
	yes, err := confirm(rosettaQuestion)
	if err != nil {
		return fmt.Errorf("vz: ask whether to install Rosetta: %w", err)
	}
	if !yes {
		return errors.New("vz: Rosetta is not installed (install declined); run `softwareupdate --install-rosetta`, or start without --vz-rosetta")
	}
	if err := h.install(); err != nil {
		return fmt.Errorf("vz: install Rosetta (or run `softwareupdate --install-rosetta`): %w", err)
	}
	if h.availability() != RosettaInstalled {
		return errors.New("vz: the Rosetta install returned, yet vz does not report Rosetta installed; run `softwareupdate --install-rosetta` and start again")
	}
	return nil
}
