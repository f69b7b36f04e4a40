package instance

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/sockpath"
	"github.com/vmdock/vmdock/vm/store"
)

// SocketPaths are the unix sockets a start of inst with cfg binds on the
// host: the host agent's control socket, the runtime's forwarded socket,
// and for QEMU its QMP socket, agent channel and the last (longest) of
// its virtiofsd sockets.
func SocketPaths(inst *store.Instance, cfg config.Config) []string {
	paths := []string{inst.ControlSocketPath()}
	if cfg.Runtime == config.RuntimeContainerd {
		paths = append(paths, inst.ContainerdSocketPath())
	} else {
		paths = append(paths, inst.DockerSocketPath())
	}
	if cfg.VMType != driver.TypeQEMU {
		return paths
	}
	paths = append(paths, filepath.Join(inst.Dir, driver.QMPSocketFile), inst.AgentSocketPath())
	shares := mounts.Shares(cfg.Mounts, cfg.MountType)
	for _, sh := range shares {
		if sh.Type == mounts.TypeVirtiofs {
			last := strings.Replace(driver.VirtiofsSocketFiles, "*", strconv.Itoa(len(shares)-1), 1)
			return append(paths, filepath.Join(inst.Dir, last))
		}
	}
	return paths
}

// CheckSocketPaths fails, in one line naming the path, its length and
// the limit, when a socket of SocketPaths is too long for this OS. A
// start runs it before it writes or spawns anything.
func CheckSocketPaths(inst *store.Instance, cfg config.Config) error {
	return sockpath.Check(sockpath.Max, SocketPaths(inst, cfg)...)
}
