package hostagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/agentbin"
	"github.com/vmdock/vmdock/network/forward"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/filesync"
	"github.com/vmdock/vmdock/vm/remote"
)

// A remote instance runs no VM: its engine is a server's own Docker
// engine, its agent session vmdock's helper on that server over ssh
// (vm/remote). The tunnels, the port watch, host access and the sync
// mounts are the VM's, on that session; a sync mount's copy is the
// server's folder at the mount's own path.

// Redial pacing of a lost ssh session: a server rebooting or a link down
// takes seconds to minutes, and each try spawns ssh.
const (
	remoteRedialMin = time.Second
	remoteRedialMax = 15 * time.Second
	// remoteAnswer bounds one ssh connect, helper start and handshake.
	remoteAnswer = 45 * time.Second
)

// remoteRun is what a remote instance's run knows of its server.
type remoteRun struct {
	server remote.Server
	helper remote.HelperOptions
	bin    []byte // the helper for the server's arch, to install when missing
}

// remoteSteps replace bootSteps for a remote instance.
func (ha *hostAgent) remoteSteps() []step {
	return []step{
		{name: "remote", run: ha.stepRemote, undo: ha.undoAgent},
		{name: "sync", run: ha.stepRemoteSync, undo: ha.files.syncs.Stop},
		{name: "tunnels", run: ha.stepRemoteTunnels, undo: ha.undoTunnels},
		{name: "docker-ping", run: ha.stepRuntimePing},
	}
}

// stepRemote probes the server, installs the helper when missing and
// opens the session.
func (ha *hostAgent) stepRemote(ctx context.Context) error {
	target, err := remote.ParseURL(ha.cfg.Remote.URL)
	if err != nil {
		return err
	}
	r := &remoteRun{server: remote.Server{Target: target, Socket: ha.cfg.Remote.Socket}}
	pctx, cancel := context.WithTimeout(ctx, remoteAnswer)
	facts, err := r.server.Probe(pctx)
	cancel()
	if err != nil {
		return err
	}
	if r.bin, err = agentbin.Binary(facts.Arch); err != nil {
		return err
	}
	key, err := ha.inst.RemoteKey()
	if err != nil {
		return err
	}
	r.helper = remote.HelperOptions{SHA256: remote.SHA256(r.bin), HostPorts: ha.cfg.Remote.HostPorts, SyncKey: key}
	ha.remote = r
	c, info, err := ha.dialRemote(ctx)
	if err != nil {
		return err
	}
	ha.noteHello(info)
	ha.adoptClient(c)
	return nil
}

// dialRemote opens one session, installing the helper first when the
// server lacks it (a first use, or a new vmdock).
func (ha *hostAgent) dialRemote(ctx context.Context) (*agent.Client, agent.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, remoteAnswer)
	defer cancel()
	c, info, err := agent.DialOnce(ctx, ha.remoteDial, ha.prepareClient)
	if !errors.Is(err, remote.ErrHelperMissing) {
		return c, info, err
	}
	slog.Info("installing vmdock's helper on the server", "server", ha.remote.server.Target.String(), "path", remote.HelperPath(ha.remote.helper.SHA256))
	if err := ha.remote.server.Install(ctx, ha.remote.bin); err != nil {
		return nil, agent.Info{}, err
	}
	return agent.DialOnce(ctx, ha.remoteDial, ha.prepareClient)
}

func (ha *hostAgent) remoteDial(ctx context.Context) (net.Conn, error) {
	return ha.remote.server.Dial(ctx, ha.remote.helper)
}

// redialRemote opens sessions until one answers or ctx ends, pausing
// longer after each failure.
func (ha *hostAgent) redialRemote(ctx context.Context) (*agent.Client, error) {
	delay := remoteRedialMin
	for attempt := 1; ; attempt++ {
		c, info, err := ha.dialRemote(ctx)
		if err == nil {
			ha.noteHello(info)
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		slog.Info("the server is not back yet", "attempt", attempt, "retry in", delay, "err", err)
		if attempt == 1 {
			ha.events.Emit("agent", control.EventNote, "", fmt.Sprintf("reconnecting to the server: %v", err))
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		delay = min(2*delay, remoteRedialMax)
	}
}

// stepRemoteSync readies each sync mount's folder on the server (made
// there, or refused with what to do) and starts the sync engine, which
// returns once every folder had its first full sync.
func (ha *hostAgent) stepRemoteSync(ctx context.Context) error {
	err := ha.onSession(ctx, "sync mounts", func(c *agent.Client) error {
		for _, sy := range ha.cfg.SyncMounts() {
			if err := c.Mount(ctx, filesync.MountRequest(sy)); err != nil {
				return fmt.Errorf("sync %s: %w", sy.HostPath, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return ha.files.syncs.Start(ctx)
}

// flushRemoteSyncs carries what containers wrote last on the server to
// the laptop before the session closes.
func (ha *hostAgent) flushRemoteSyncs() {
	ha.mu.Lock()
	c := ha.session.client
	ha.mu.Unlock()
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ha.opts.StopTimeout)
	defer cancel()
	ha.files.syncs.FlushBeforeStop(ctx, c, ha.opts.AgentAnswer, ha.stopNote)
}

// stepRemoteTunnels forwards the instance's docker.sock to the server's
// engine socket and follows its published ports.
func (ha *hostAgent) stepRemoteTunnels(ctx context.Context) error {
	rules, err := forward.ParseRules(toNetworkRules(ha.cfg.PortForward))
	if err != nil {
		return err
	}
	spec := tunnelSpec{hostSocket: runtimeFor(ha.cfg.Runtime).hostSocket(ha.inst), guestSocket: ha.cfg.Remote.Socket,
		portBind: ha.cfg.Network.PortBind, rules: rules, yield: ha.yieldToPublished}
	t, err := openTunnels(ctx, spec, &ha.session.link)
	if err != nil {
		return err
	}
	ha.mu.Lock()
	ha.run.tunnels = t
	ha.mu.Unlock()
	return nil
}

// serveRemote runs a booted remote instance until a stop or a signal;
// the server's containers are left running.
func (ha *hostAgent) serveRemote(ctx context.Context) error {
	ha.setPhase(control.PhaseRunning)
	ha.startReconnect(ctx)
	ha.events.Emit("ready", control.EventReady, "", "")
	slog.Info("remote instance ready", "server", ha.remote.server.Target.String(), "timing", ha.events.StepTimes())
	select {
	case <-ha.stop.ch:
	case <-ctx.Done():
	}
	ha.setPhase(control.PhaseStopping)
	ha.flushRemoteSyncs()
	ha.shutdown(control.StopRequest{Force: true})
	ha.events.Emit("stop", control.EventStopped, "", control.StopRemote)
	return nil
}
