package main

import (
	"os"
	"runtime"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/macos"
	"github.com/vmdock/vmdock/vm/qemu"
)

// detectHost describes this machine. It is the one place vmdock probes the
// host: main calls it once and every command, config and the host agent
// read that value. QEMU's part (its accelerator, a virtiofsd) comes from
// the driver, which probes at most once per process.
func detectHost() config.Host {
	q := qemu.Capabilities()
	h := config.Host{
		OS:           runtime.GOOS,
		Arch:         runtime.GOARCH,
		MacOSVersion: macOSVersion(),
		CPUs:         runtime.NumCPU(),
		Accel:        q.Accel,
		Virtiofsd:    q.UsableVirtiofsd(),
		SSHAuthSock:  os.Getenv("SSH_AUTH_SOCK"),
	}
	h.VZ = macos.VZSupported(h.MacOSVersion)
	return h
}
