package runtime

import (
	"context"
	"fmt"

	"github.com/vmdock/vmdock/agent/guest/guestos"
)

// Runtime is a container runtime the guest starts: docker or containerd.
type Runtime interface {
	// Start configures the runtime for cfg, starts it and returns once
	// it answers.
	Start(ctx context.Context, cfg Config) error
}

// Config is what the runtimes are told of the guest.
type Config struct {
	// HostAccessIP reaches the host from containers (host-gateway); ""
	// without host access.
	HostAccessIP string
	// DNSIP is the agent's DNS server for containers; "" when none runs.
	DNSIP string
}

// StartUnitsNow starts each group of units after the one before it,
// without the ordering their unit files ask for (network.target,
// basic.target and the like): the agent has already done what the daemons
// need (the data disk, their configuration), and under TCG the rest of the
// boot would hold them for seconds.
func StartUnitsNow(ctx context.Context, os guestos.OS, groups ...[]string) error {
	for _, units := range groups {
		if _, err := os.Run(ctx, "systemctl", append([]string{"start", "--job-mode=ignore-dependencies"}, units...)...); err != nil {
			return err
		}
	}
	return nil
}

// StopAll stops both runtimes and their sockets, so the containers end
// cleanly; it waits for each container's stop timeout.
func StopAll(ctx context.Context, os guestos.OS) error {
	if _, err := os.Run(ctx, "systemctl", "stop", "docker.socket", "docker.service", "containerd.service"); err != nil {
		return fmt.Errorf("stop the container runtimes: %w", err)
	}
	return nil
}
