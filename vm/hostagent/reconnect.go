package hostagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/vm/control"
)

// Phase of the host agent while it redials a lost guest agent session;
// the instance stays Running (the VM is up), status shows the phase.

// Redial pacing: the guest agent comes back within seconds of a crash
// (systemd restarts it), and the host must notice at once, but a guest
// whose agent stays away must not cost a busy loop.
const (
	redialMin = 100 * time.Millisecond
	redialMax = time.Second
	// reconnectWait bounds how long a `vmdock ssh` waits for a session.
	reconnectWait = 15 * time.Second
)

// agentLink holds the current guest agent session. Everything that outlives
// one session (the docker socket, the port forwarder, the port watch)
// goes through it, so a reconnect swaps the session under them. The zero
// value is ready to use.
type agentLink struct {
	mu      sync.Mutex
	c       *agent.Client
	changed chan struct{} // closed (and replaced) when c changes
}

func (l *agentLink) state() (*agent.Client, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.c, l.changed
}

// set installs c as the current session and wakes whoever waits for one.
func (l *agentLink) set(c *agent.Client) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.c = c
	if l.changed != nil {
		close(l.changed)
	}
	l.changed = make(chan struct{})
}

// live returns the current session once it is up, waiting for a reconnect
// while the last one is gone.
// guestAddr asks the guest agent for the guest's IPv4 address on the VM
// network. It is asked per port opened, not kept: a resumed guest may have
// taken a new lease.
func (l *agentLink) guestAddr(ctx context.Context) (netip.Addr, error) {
	c, err := l.live(ctx)
	if err != nil {
		return netip.Addr{}, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, s := range info.Addrs {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() && !a.IsLoopback() {
			return a, nil
		}
	}
	return netip.Addr{}, errors.New("the guest has no address on the VM network")
}

func (l *agentLink) live(ctx context.Context) (*agent.Client, error) {
	for {
		c, changed := l.state()
		if c != nil && !ended(c) {
			return c, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

func ended(c *agent.Client) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// Dial opens a stream in the guest through the current session. During a
// reconnect it waits (within ctx) for the next session instead of failing
// at once, and a session that dies under the dial is retried on the next.
func (l *agentLink) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	for {
		c, err := l.live(ctx)
		if err != nil {
			return nil, fmt.Errorf("dial guest %s %s: the guest agent is not connected: %w", network, addr, err)
		}
		conn, err := c.Dial(ctx, network, addr)
		if err == nil || !ended(c) || ctx.Err() != nil {
			return conn, err
		}
	}
}

// adoptClient makes c the session everything uses: the link (tunnels and
// the port watch follow it) and the guest log follower. prepareClient
// already serves guest-opened streams (host access) on it.
func (ha *hostAgent) adoptClient(c *agent.Client) {
	ha.mu.Lock()
	ha.session.client = c
	ha.session.count++
	ha.mu.Unlock()
	ha.session.link.set(c)
	if ha.remote == nil { // the helper keeps no journal
		go ha.followGuestLog(c)
	}
}

// startReconnect keeps the agent session alive for the rest of the run.
func (ha *hostAgent) startReconnect(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	ha.mu.Lock()
	ha.session.stopReconnecting = func() { cancel(); <-done }
	ha.mu.Unlock()
	go func() {
		defer close(done)
		ha.keepAgentConnected(ctx)
	}()
}

// stopReconnect ends the reconnect loop before a shutdown closes the
// session, so the close is not taken for a crash.
func (ha *hostAgent) stopReconnect() {
	ha.mu.Lock()
	stop := ha.session.stopReconnecting
	ha.session.stopReconnecting = nil
	ha.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// keepAgentConnected waits for the session to end and redials, until ctx
// ends.
func (ha *hostAgent) keepAgentConnected(ctx context.Context) {
	for {
		c, _ := ha.session.link.state()
		if c == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-c.Done():
		}
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		slog.Warn("the guest agent session ended; reconnecting")
		ha.swapPhase(control.PhaseRunning, control.PhaseReconnecting)
		ha.events.Emit("agent", control.EventNote, "", "the guest agent session ended; reconnecting")
		c.Close()
		nc, err := ha.redial(ctx)
		if err != nil {
			return // stopping
		}
		ha.adoptClient(nc)
		ha.swapPhase(control.PhaseReconnecting, control.PhaseRunning)
		slog.Info("guest agent reconnected", "after", time.Since(start).Round(time.Millisecond))
		ha.events.Emit("agent", control.EventNote, "", "guest agent reconnected")
		if ha.remote != nil {
			// A new helper serves the rest afresh; the sync sessions
			// redial at once instead of after the engine's back-off.
			go ha.files.syncs.Reconnect(ctx)
			continue
		}
		go ha.restoreGuestServices(ctx, nc)
		go ha.files.syncs.Reconnect(ctx)
	}
}

// redial dials the guest agent until it answers or ctx ends.
func (ha *hostAgent) redial(ctx context.Context) (*agent.Client, error) {
	if ha.remote != nil {
		return ha.redialRemote(ctx)
	}
	c, info, err := agent.DialUntilUp(ctx, ha.run.machine.DialAgent, agent.RetryOptions{
		Delay: redialMin, MaxDelay: redialMax, Prepare: ha.prepareClient,
		Failed: func(attempt int, err error) {
			if attempt == 1 || attempt%30 == 0 {
				slog.Info("guest agent not back yet", "attempt", attempt, "err", err)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	ha.noteHello(info)
	return c, nil
}

// restoreGuestServices gives a restarted guest agent back what lived in
// its process: the host-access listener and DNS server (Setup is
// idempotent). Disks, mounts and dockerd are system state that outlive the
// agent, so they are not redone.
func (ha *hostAgent) restoreGuestServices(ctx context.Context, c *agent.Client) {
	s := ha.guestSetup()
	s.GrowRoot, s.DataDisk, s.Binfmt, s.Rosetta = false, "", false, false
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Setup(ctx, s); err != nil && !errors.Is(ctx.Err(), context.Canceled) {
		slog.Warn("restore guest services after reconnect", "err", err)
	}
}

// swapPhase moves the phase from old to new, and leaves any other phase
// (stopping) alone.
func (ha *hostAgent) swapPhase(old, new string) {
	ha.mu.Lock()
	defer ha.mu.Unlock()
	if ha.run.phase == old {
		ha.run.phase = new
	}
}
