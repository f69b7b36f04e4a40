package guest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmdock/vmdock/agent/guest/guestos"
)

// containerdConfig is containerd's default configuration file. Debian's
// package ships none, so containerd runs on its defaults, CRI included.
const containerdConfig = "/etc/containerd/config.toml"

// containerdConfigMarker starts the file the agent writes, so a later boot
// knows the file is its own to rewrite and never touches one a user wrote.
const containerdConfigMarker = "# Written by the vmdock agent"

// containerdConfigText keeps containerd's defaults but for the CRI plugin,
// the Kubernetes API: neither dockerd, nerdctl nor BuildKit's containerd
// worker use it, and its start (CNI config loading and watching, the
// streaming server, state recovery, the event monitor) is CPU a TCG boot,
// bound by CPU, takes from the daemons that are waited for. Docker's own
// containerd.io package ships the same choice.
const containerdConfigText = containerdConfigMarker + ` before containerd starts: containerd's
# defaults without the CRI plugin, which nothing in the guest uses. Edit freely:
# once this first line is gone the agent leaves the file alone.
version = 2
disabled_plugins = ["io.containerd.grpc.v1.cri"]
`

// writeContainerdConfig writes containerdConfigText unless a configuration
// the agent did not write is there.
func (s *Server) writeContainerdConfig() error {
	p := s.path(containerdConfig)
	b, err := os.ReadFile(p)
	switch {
	case err == nil && !strings.HasPrefix(string(b), containerdConfigMarker):
		return nil
	case err == nil && string(b) == containerdConfigText:
		return nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", containerdConfig, err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", containerdConfig, err)
	}
	return guestos.WriteFile(p, []byte(containerdConfigText), 0o644)
}
