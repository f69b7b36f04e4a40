package hostagent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/network"
	"github.com/vmdock/vmdock/vm"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/qemu"
	"github.com/vmdock/vmdock/vm/vz"
)

// guestDockerSocket is where dockerd listens inside the guest.
const guestDockerSocket = "/var/run/docker.sock"

// tunnels are the host-side ends of everything the guest serves: the docker
// socket and every forwarded port.
type tunnels struct {
	docker    *network.SocketForwarder
	forwarder *network.PortForwarder
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func startTunnels(ctx context.Context, inst *vm.Instance, cfg vm.Config, c *agent.Client) (*tunnels, error) {
	dial := network.DialFunc(c.Dial)
	docker, err := network.ListenSocket(inst.DockerSocketPath(), "unix", guestDockerSocket, dial)
	if err != nil {
		return nil, err
	}
	rules, err := network.ParseRules(toNetworkRules(cfg.PortForward))
	if err != nil {
		docker.Close()
		return nil, err
	}
	ports := network.NewPortForwarder(network.PortForwarderConfig{BindAddr: cfg.Network.PortBind, Dial: dial, Rules: rules})
	wctx, cancel := context.WithCancel(context.Background())
	events, err := c.WatchPorts(wctx)
	if err != nil {
		cancel()
		docker.Close()
		ports.Close()
		return nil, fmt.Errorf("watch guest ports: %w", err)
	}
	t := &tunnels{docker: docker, forwarder: ports, cancel: cancel}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for ev := range events {
			ports.Apply(network.PortEvent{Added: ev.Added, Proto: ev.Proto, IP: ev.IP, Port: ev.Port})
		}
	}()
	return t, nil
}

func (t *tunnels) ports() []vm.ForwardedPort {
	var out []vm.ForwardedPort
	for _, p := range t.forwarder.Ports() {
		out = append(out, vm.ForwardedPort{Proto: p.Proto, GuestPort: p.GuestPort, HostAddr: p.HostAddr, Error: p.Error})
	}
	return out
}

func (t *tunnels) close() {
	t.cancel()
	t.docker.Close()
	t.forwarder.Close()
	t.wg.Wait()
}

// waitDockerPing polls /_ping through the host docker socket: the proof that
// the whole chain (socket, tunnel, agent, dockerd) works.
func waitDockerPing(ctx context.Context, sock string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var lastErr error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("docker did not answer /_ping on %s: %v", sock, lastErr)
		case <-time.After(500 * time.Millisecond):
		}
		slog.Debug("waiting for docker", "err", lastErr)
	}
}

func newDriver(vmType string) (driver.Driver, error) {
	switch vmType {
	case "qemu":
		return qemu.New(qemu.Options{CacheDir: hostCacheDir()}), nil
	case "vz":
		return vz.New(), nil
	}
	return nil, fmt.Errorf("unknown vm type %q (accepted: qemu, vz)", vmType)
}

// hostCacheDir keeps per-host verdicts (the accelerator probe) next to the
// image cache; without one every start probes again.
func hostCacheDir() string {
	dir, err := images.DefaultCacheDir()
	if err != nil {
		slog.Warn("no cache folder; the accelerator is probed at every start", "err", err)
		return ""
	}
	return dir
}

func toNetworkRules(pf vm.PortForward) ([]network.RuleSpec, []string) {
	specs := make([]network.RuleSpec, 0, len(pf.Rules))
	for _, r := range pf.Rules {
		specs = append(specs, network.RuleSpec{Guest: r.Guest, Host: r.Host, Proto: r.Proto})
	}
	return specs, pf.Ignore
}
