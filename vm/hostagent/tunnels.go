package hostagent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vmdock/vmdock/dockerhost/engineapi"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/network/forward"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/store"
)

// guestDockerSocket is where dockerd listens inside the guest.
const guestDockerSocket = "/var/run/docker.sock"

// tunnels are the host-side ends of everything the guest serves: the docker
// socket and every forwarded port. They dial through the agent link, so
// they outlive one agent session, and the port watch starts again on each
// new session.
type tunnels struct {
	docker    *forward.SocketForwarder
	forwarder *forward.PortForwarder
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// tunnelSpec says where the tunnels listen and what they reach.
type tunnelSpec struct {
	hostSocket  string // the runtime's socket on the host
	guestSocket string // the runtime's socket in the guest
	portBind    string // host IP forwarded ports listen on
	rules       *forward.Rules
	// direct reaches guest TCP ports over the VM's network (nil: the
	// driver cannot, every port tunnels through the guest agent).
	direct forward.DirectPath
	// hold makes each connection a use of the VM (the idle pause).
	hold forward.Hold
	// yield frees a host port vmdock's domains router holds for a
	// published port (nil: none).
	yield func(port int) (giveBack func())
}

func startTunnels(ctx context.Context, inst *store.Instance, cfg config.Config, link *agentLink, direct forward.DirectPath, hold forward.Hold, yield func(int) func()) (*tunnels, error) {
	rules, err := forward.ParseRules(toNetworkRules(cfg.PortForward))
	if err != nil {
		return nil, err
	}
	rt := runtimeFor(cfg.Runtime)
	spec := tunnelSpec{hostSocket: rt.hostSocket(inst), guestSocket: rt.guestSocket, portBind: cfg.Network.PortBind, rules: rules, direct: direct, hold: hold, yield: yield}
	return openTunnels(ctx, spec, link)
}

func openTunnels(ctx context.Context, spec tunnelSpec, link *agentLink) (*tunnels, error) {
	dial := forward.DialFunc(link.Dial)
	docker, err := forward.ListenSocketHeld(spec.hostSocket, "unix", spec.guestSocket, dial, spec.hold)
	if err != nil {
		return nil, err
	}
	ports := forward.NewPortForwarder(forward.PortForwarderConfig{BindAddr: spec.portBind, Dial: dial, Direct: spec.direct, Rules: spec.rules, Hold: spec.hold, Yield: spec.yield})
	wctx, cancel := context.WithCancel(context.Background())
	fail := func(err error) (*tunnels, error) {
		cancel()
		docker.Close()
		ports.Close()
		return nil, fmt.Errorf("watch guest ports: %w", err)
	}
	c, err := link.live(ctx)
	if err != nil {
		return fail(err)
	}
	events, err := c.WatchPorts(wctx)
	if err != nil {
		return fail(err)
	}
	t := &tunnels{docker: docker, forwarder: ports, cancel: cancel}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.followPorts(wctx, link, c, events)
	}()
	return t, nil
}

// followPorts applies the guest's port events until ctx ends; when a
// watch ends (the session died) it watches again on the next session,
// whose first full listing resyncs the forwards.
func (t *tunnels) followPorts(ctx context.Context, link *agentLink, c *agent.Client, events <-chan agent.PortEvent) {
	for {
		t.apply(events)
		if ctx.Err() != nil {
			return
		}
		var err error
		c, events, err = t.rewatch(ctx, link, c)
		if err != nil {
			return
		}
	}
}

// apply feeds one watch to the forwarder. Each watch starts with the
// guest's full listing; ports the forwarder has that it lacks went away
// while no watch ran.
func (t *tunnels) apply(events <-chan agent.PortEvent) {
	t.forwarder.BeginSync()
	for ev := range events {
		if ev.Synced {
			t.forwarder.EndSync()
			continue
		}
		t.forwarder.Apply(forward.PortEvent{Added: ev.Added, Proto: ev.Proto, IP: ev.IP, Port: ev.Port})
	}
}

// rewatch starts a watch on the current live session. A watch that ended
// on a session still alive is retried after a pause, not in a loop.
func (t *tunnels) rewatch(ctx context.Context, link *agentLink, last *agent.Client) (*agent.Client, <-chan agent.PortEvent, error) {
	for {
		c, err := link.live(ctx)
		if err != nil {
			return nil, nil, err
		}
		if c == last {
			select {
			case <-time.After(redialMax):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		events, err := c.WatchPorts(ctx)
		if err == nil {
			return c, events, nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		slog.Warn("watch guest ports", "err", err)
		last = c
	}
}

func (t *tunnels) ports() []control.ForwardedPort { return t.forwarder.Ports() }

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
	client := engineapi.Unix(sock)
	defer client.CloseIdleConnections()
	var lastErr error
	for {
		err := client.Ping(ctx)
		if err == nil {
			return nil
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

func toNetworkRules(pf config.PortForward) ([]forward.RuleSpec, []string) {
	specs := make([]forward.RuleSpec, 0, len(pf.Rules))
	for _, r := range pf.Rules {
		specs = append(specs, forward.RuleSpec{Guest: r.Guest, Host: r.Host, Proto: r.Proto})
	}
	return specs, pf.Ignore
}
