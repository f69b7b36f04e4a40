package containerd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/agent/guest/runtime"
	"github.com/vmdock/vmdock/internal/atomicfile"
)

const (
	nerdctlTOML = "/etc/nerdctl/nerdctl.toml"
	resolvConf  = "/etc/resolv.conf"
	// Timeout bounds the runtime's start.
	Timeout = 2 * time.Minute
)

// Engine is the containerd runtime, for nerdctl.
type Engine struct {
	guestos.Sys
	// ReleaseReserve frees the data disk's reserve when the disk is full,
	// so the daemon starts; nil: nothing to free.
	ReleaseReserve func() (bool, error)
	// UnitsStarted is called once containerd's unit started: from then
	// on the port watch reads portmap's DNAT rules.
	UnitsStarted func()
}

// Start is the containerd runtime's counterpart of docker's:
// containerd with its state on the data disk (the same bind mount dockerd's
// containerd uses), nerdctl's view of the host, BuildKit when the image
// carries it, and the port watch reading portmap's DNAT rules, since
// `nerdctl run -p` publishes a port without a listening socket.
func (s *Engine) Start(ctx context.Context, cfg runtime.Config) error {
	if err := s.writeNerdctlHostGateway(cfg.HostAccessIP); err != nil {
		return err
	}
	if err := runtime.WriteContainerdConfig(s.Sys); err != nil {
		return err
	}
	// nerdctl copies the guest's resolv.conf into containers (resolved's
	// upstream list when the stub is in use), so containers find
	// host.docker.internal only if the guest itself asks the agent's DNS.
	if d := cfg.DNSIP; d != "" {
		if err := s.pointResolvConf(d); err != nil {
			return err
		}
	}
	if s.ReleaseReserve != nil {
		if _, err := s.ReleaseReserve(); err != nil {
			s.Logger().Warn("data disk reserve", "err", err)
		}
	}
	if err := runtime.StartUnitsNow(ctx, s.OS, []string{"containerd"}); err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	if s.UnitsStarted != nil {
		s.UnitsStarted()
	}
	if err := s.waitContainerdSocket(ctx); err != nil {
		return err
	}
	if _, err := os.Stat(s.Path(guestos.BuildkitUnit)); err == nil {
		// Not waited for: only `nerdctl build` needs it, and a failure
		// there says so itself.
		if _, err := s.OS.Run(ctx, "systemctl", "start", "--no-block", "buildkit"); err != nil {
			s.Logger().Warn("buildkit did not start; nerdctl build will fail", "err", err)
		}
	}
	return nil
}

// waitContainerdSocket returns once containerd accepts a connection on
// its socket. containerd listens only after loading its plugins, and
// systemd's start of it (Type=notify) normally returns after that, so the
// first dial nearly always answers; the loop covers a unit without the
// notification. A dial replaces running `ctr version`, a Go binary of
// tens of megabytes whose start costs most of a second under TCG, every
// 250 ms.
func (s *Engine) waitContainerdSocket(ctx context.Context) error {
	sock := s.Path(agent.GuestContainerdSocket)
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "unix", sock)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd did not answer on %s: %w", agent.GuestContainerdSocket, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var hostGatewayLine = regexp.MustCompile(`(?m)^host_gateway_ip\s*=.*\n?`)

// writeNerdctlHostGateway sets nerdctl's host_gateway_ip, so `--add-host
// name:host-gateway` reaches the host as it does with docker; the rest of
// the image's nerdctl.toml stays.
func (s *Engine) writeNerdctlHostGateway(ip string) error {
	p := s.Path(nerdctlTOML)
	b, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", nerdctlTOML, err)
	}
	toml := hostGatewayLine.ReplaceAllString(string(b), "")
	if ip != "" {
		// Top-level keys must come before any [table].
		toml = "host_gateway_ip = " + strconv.Quote(ip) + "\n" + toml
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", nerdctlTOML, err)
	}
	return guestos.WriteFile(p, []byte(toml), 0o644)
}

// pointResolvConf makes the guest resolve through the agent's DNS server
// at ip, replacing the link to systemd-resolved's stub: nerdctl skips the
// stub (a loopback address is useless in a container) and would hand
// containers resolved's upstreams, which do not know host.docker.internal.
func (s *Engine) pointResolvConf(ip string) error {
	var b strings.Builder
	b.WriteString("# Written by the vmdock agent (containerd runtime): its DNS server answers\n")
	b.WriteString("# host.docker.internal and forwards the rest to the guest's resolvers.\n")
	b.WriteString("nameserver " + ip + "\n")
	b.WriteString("options edns0\n")
	// The link itself goes: writing through it would land in /run, which
	// resolved rewrites.
	return atomicfile.ReplaceFile(s.Path(resolvConf), []byte(b.String()), 0o644)
}
