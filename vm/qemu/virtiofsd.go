package qemu

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/vmdock/vmdock/mounts"
)

// Virtiofsd is one virtiofs daemon binary and the flag dialect it speaks:
// the legacy C daemon shipped with QEMU up to 7.2 (-o source=...) or the
// Rust one (--shared-dir ...).
type Virtiofsd struct {
	Path string
	Rust bool
}

// DetectVirtiofsd runs path --help and tells the two daemons apart by
// their flags, which is sturdier than parsing version strings.
func DetectVirtiofsd(path string) (Virtiofsd, error) {
	// The legacy daemon exits 0 on --help, the Rust one too; either way
	// the text is what matters, so the exit status is not checked.
	out, err := exec.Command(path, "--help").CombinedOutput()
	if len(out) == 0 && err != nil {
		return Virtiofsd{}, fmt.Errorf("run %s --help: %w", path, err)
	}
	return Virtiofsd{Path: path, Rust: isRustVirtiofsd(string(out))}, nil
}

func isRustVirtiofsd(help string) bool { return strings.Contains(help, "--shared-dir") }

// args builds the daemon's argv (without the binary) for one share.
// asRoot selects the sandbox: as root both daemons use their namespace
// sandbox; an unprivileged Rust daemon cannot, so it runs unsandboxed and
// creates files as the host user, which is what a dev share wants. The
// legacy daemon only runs as root and has no read-only switch; for a read-only share the guest
// mounts it ro.
func (v Virtiofsd) args(socket string, share mounts.Share, asRoot bool) []string {
	if v.Rust {
		a := []string{
			"--socket-path=" + socket,
			"--shared-dir=" + share.HostPath,
			"--cache=" + cacheMode(share),
			"--announce-submounts",
		}
		if !asRoot {
			a = append(a, "--sandbox=none")
		}
		if share.ReadOnly {
			a = append(a, "--readonly")
		}
		return a
	}
	// Legacy option values are comma-separated lists, so commas in the
	// path are escaped the FUSE way.
	src := strings.ReplaceAll(share.HostPath, ",", "\\,")
	a := []string{
		"--socket-path=" + socket,
		"-o", "source=" + src,
		"-o", "cache=" + cacheMode(share),
		"-o", "announce_submounts",
	}
	// The legacy daemon needs root for any of its sandboxes; started
	// unprivileged it fails at once and Start reports its stderr.
	return a
}

// cacheMode is the share's virtiofsd cache setting: auto unless the mount
// asks for always (faster metadata, host edits seen later) or never.
func cacheMode(share mounts.Share) string {
	if share.Cache != "" {
		return share.Cache
	}
	return "auto"
}
