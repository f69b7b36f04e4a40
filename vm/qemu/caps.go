package qemu

import (
	"os"
	"sync"
)

// HostCaps is what QEMU can use on this host, for the host description the
// command line builds once per process (config.Host).
type HostCaps struct {
	// Accel is QEMU's hardware accelerator on this OS (kvm, hvf), whether
	// or not it works here; the driver learns that at start. Empty: none.
	Accel string
	// Virtiofsd is the virtiofs daemon found and its flag dialect; an
	// empty Path: none found.
	Virtiofsd Virtiofsd
	// virtiofsdErr is why the daemon found could not tell its dialect;
	// starting a virtiofs share reports it.
	virtiofsdErr error
}

// UsableVirtiofsd is the daemon's path when this user can run it, else "":
// the legacy C daemon runs only as root, so for anyone else it does not
// count.
func (c HostCaps) UsableVirtiofsd() string {
	v := c.Virtiofsd
	if v.Path == "" || c.virtiofsdErr != nil || (!v.Rust && os.Geteuid() != 0) {
		return ""
	}
	return v.Path
}

// capsCache holds the one probe of a process.
type capsCache struct {
	once sync.Once
	caps HostCaps
}

// hostCaps is replaced by tests that count probes.
var hostCaps = &capsCache{}

// Capabilities probes the host on first use and returns the same answer for
// the rest of the process: `virtiofsd --help` runs at most once, however
// many commands, configs and boots ask.
func Capabilities() HostCaps {
	c := hostCaps
	c.once.Do(func() { c.caps = probeCaps() })
	return c.caps
}

func probeCaps() HostCaps {
	var c HostCaps
	c.Accel, _ = hostAccel()
	if p := findVirtiofsd(); p != "" {
		c.Virtiofsd, c.virtiofsdErr = DetectVirtiofsd(p)
		c.Virtiofsd.Path = p
	}
	return c
}
