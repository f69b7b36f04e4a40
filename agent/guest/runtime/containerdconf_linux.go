package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmdock/vmdock/agent/guest/guestos"
)

// ContainerdConfig is containerd's default configuration file. Debian's
// package ships none, so containerd runs on its defaults, CRI included.
const ContainerdConfig = "/etc/containerd/config.toml"

// ContainerdConfigMarker starts the file the agent writes, so a later boot
// knows the file is its own to rewrite and never touches one a user wrote.
const ContainerdConfigMarker = "# Written by the vmdock agent"

// ContainerdConfigText keeps containerd's defaults but for the CRI plugin,
// the Kubernetes API: neither dockerd, nerdctl nor BuildKit's containerd
// worker use it, and its start (CNI config loading and watching, the
// streaming server, state recovery, the event monitor) is CPU a TCG boot,
// bound by CPU, takes from the daemons that are waited for. Docker's own
// containerd.io package ships the same choice.
const ContainerdConfigText = ContainerdConfigMarker + ` before containerd starts: containerd's
# defaults without the CRI plugin, which nothing in the guest uses. Edit freely:
# once this first line is gone the agent leaves the file alone.
version = 2
disabled_plugins = ["io.containerd.grpc.v1.cri"]
`

// WriteContainerdConfig writes ContainerdConfigText unless a configuration
// the agent did not write is there.
func WriteContainerdConfig(s guestos.Sys) error {
	p := s.Path(ContainerdConfig)
	b, err := os.ReadFile(p)
	switch {
	case err == nil && !strings.HasPrefix(string(b), ContainerdConfigMarker):
		return nil
	case err == nil && string(b) == ContainerdConfigText:
		return nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", ContainerdConfig, err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", ContainerdConfig, err)
	}
	return guestos.WriteFile(p, []byte(ContainerdConfigText), 0o644)
}
