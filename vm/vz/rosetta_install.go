package vz

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// rosettaHost is what offering the Rosetta install needs from the Mac; each
// build fills it (rosetta_darwin_*.go, rosetta_unavailable.go) and tests
// script it.
type rosettaHost struct {
	availability func() RosettaAvailability // nil: this build has no vz at all
	install      func(ctx context.Context) error
}

// OfferRosettaInstall runs before a --vz-rosetta start hands over to the
// host agent, which has no terminal to ask on. With Rosetta installed it
// does nothing; otherwise, when interactive (stdin and stderr are a
// terminal) it asks through confirm and installs, and without a terminal
// it returns the one-line error the host agent would.
func OfferRosettaInstall(ctx context.Context, interactive bool, confirm func(question string) (bool, error)) error {
	return currentRosettaHost().offer(ctx, interactive, confirm)
}

// The answer is also the user's acceptance of Apple's license, which the
// installer is then told of (--agree-to-license): nothing else asks.
const rosettaQuestion = "Rosetta is not installed, and --vz-rosetta needs it. Install it now with softwareupdate, accepting Apple's Rosetta license? [y/N] "

func (h rosettaHost) offer(ctx context.Context, interactive bool, confirm func(string) (bool, error)) error {
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
	if err := h.install(ctx); err != nil {
		return fmt.Errorf("vz: install Rosetta: %w", err)
	}
	if h.availability() != RosettaInstalled {
		return errors.New("vz: the Rosetta install returned, yet vz does not report Rosetta installed; run `softwareupdate --install-rosetta` and start again")
	}
	return nil
}

// softwareUpdate installs Rosetta with macOS's command line installer.
// Virtualization.framework's own installer shows a license dialog and
// waits for it forever when no one can see it (over SSH, without a login
// session); softwareupdate takes the license as an argument and ends.
type softwareUpdate struct {
	run     func(ctx context.Context, name string, args ...string) ([]byte, error)
	timeout time.Duration
}

// rosettaInstallTimeout is far above the download's usual minute or two,
// yet ends a stuck install while the user still waits for the start.
const rosettaInstallTimeout = 10 * time.Minute

const softwareUpdatePath = "/usr/sbin/softwareupdate"

var rosettaSoftwareUpdate = softwareUpdate{run: runCombined, timeout: rosettaInstallTimeout}

func (s softwareUpdate) install(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.run(ctx, softwareUpdatePath, "--install-rosetta", "--agree-to-license")
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("`softwareupdate --install-rosetta --agree-to-license` did not finish within %s; run it yourself and start again", s.timeout)
	case ctx.Err() != nil:
		return fmt.Errorf("softwareupdate --install-rosetta: %w", ctx.Err())
	case err != nil:
		if last := lastLine(out); last != "" {
			return fmt.Errorf("softwareupdate --install-rosetta: %w: %s", err, last)
		}
		return fmt.Errorf("softwareupdate --install-rosetta: %w", err)
	}
	return nil
}

// runCombined runs a program to its end or ctx's, and returns what it
// printed on stdout and stderr.
func runCombined(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	// A child left holding the output pipe must not outlive the deadline.
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// lastLine is a program's last non-empty line: softwareupdate ends with
// its reason.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
