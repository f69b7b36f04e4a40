package hostagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/idle"
)

// The idle pause: the tunnels, `vmdock ssh`/`exec`/`nerdctl`
// streams and the control routes that reach the guest hold the VM
// (ha.hold) while they are open; vm/idle pauses it after the idle period
// and wakes it for the next use. What must not wake it (status, share
// edits, the sync backstop, the clock watch) does not hold it, and stays
// off the agent session while it is paused.

// Bounds of the guest's part: the quiesce waits for its trims (the guest
// bounds them to a minute).
const (
	quiesceTimeout = 90 * time.Second
	wakeClockWait  = 5 * time.Second
)

func (ha *hostAgent) newIdleMonitor() *idle.Monitor {
	return idle.New(idle.Config{
		After:   time.Duration(ha.cfg.Idle),
		Busy:    ha.guestBusy,
		Prepare: ha.prepareIdlePause,
		Pause:   ha.pauseIdle,
		Wake:    ha.wakeFromIdle,
		Paused:  ha.vmPaused,
	})
}

// hold marks one use of the VM (network.Hold's shape); a paused VM is
// woken first.
func (ha *hostAgent) hold(ctx context.Context) (func(), error) {
	return ha.idle.monitor.Hold(ctx)
}

// runIdle pauses the VM while it is unused, once the instance is ready.
func (ha *hostAgent) runIdle(ctx context.Context) {
	if _, ok := ha.currentMachine().(driver.Pauser); !ok {
		ha.mu.Lock()
		ha.idle.off = "the " + ha.cfg.VMType + " driver cannot pause this VM"
		ha.mu.Unlock()
		return
	}
	ha.idle.monitor.Run(ctx)
}

// setIdle serves `vmdock set idle`.
func (ha *hostAgent) setIdle(after time.Duration) error {
	if err := config.CheckIdle(config.Duration(after)); err != nil {
		return err
	}
	ha.idle.monitor.SetAfter(after)
	slog.Info("idle period set", "after", after)
	return nil
}

func (ha *hostAgent) idleStatus() *control.IdleStatus {
	st := ha.idle.monitor.State()
	out := &control.IdleStatus{After: config.Duration(st.After).String(), Paused: st.Paused, Pauses: st.Pauses, Users: st.Users}
	ha.mu.Lock()
	out.Off = ha.idle.off
	ha.mu.Unlock()
	if st.Paused {
		since := st.PausedSince
		out.PausedSince = &since
	}
	if st.Pauses > 0 && st.LastWake > 0 {
		ms := float64(st.LastWake.Microseconds()) / 1000
		out.LastWakeMs = &ms
	}
	return out
}

// liveClient is the agent session now, or nil while there is none.
func (ha *hostAgent) liveClient() *agent.Client {
	c, _ := ha.session.link.state()
	if c == nil || ended(c) {
		return nil
	}
	return c
}

// guestBusy asks the guest whether containers run.
func (ha *hostAgent) guestBusy(ctx context.Context) (bool, error) {
	c := ha.liveClient()
	if c == nil {
		return true, errors.New("the guest agent is not connected")
	}
	r, err := c.IdleCheck(ctx)
	if err != nil {
		return true, err
	}
	return r.RunningContainers > 0, nil
}

// prepareIdlePause has the guest give back its cold page cache and freed
// disk blocks; the guest stops pinging until the next request.
func (ha *hostAgent) prepareIdlePause(ctx context.Context) error {
	c := ha.liveClient()
	if c == nil {
		return errors.New("the guest agent is not connected")
	}
	ctx, cancel := context.WithTimeout(ctx, quiesceTimeout)
	defer cancel()
	return c.Quiesce(ctx)
}

// pauseIdle halts the sync mounts (they would write to a paused guest),
// stops the host's keepalive pings and pauses the VM; any failure undoes
// what it did, and the VM runs on.
func (ha *hostAgent) pauseIdle(ctx context.Context) error {
	p, ok := ha.currentMachine().(driver.Pauser)
	if !ok {
		return errors.New("the driver cannot pause this VM")
	}
	syncsHalted := ha.files.syncs.Pause(ctx, "") == nil
	c := ha.liveClient()
	if c != nil {
		c.Keepalive().Suspend()
	}
	if err := p.Pause(ctx); err != nil {
		if c != nil {
			c.Keepalive().Resume()
		}
		if syncsHalted {
			ha.resumeSyncs()
		}
		return err
	}
	ha.mu.Lock()
	ha.idle.syncsHalted = syncsHalted
	ha.mu.Unlock()
	ha.events.Emit("idle", control.EventNote, "", "paused while idle")
	return nil
}

// vmPaused asks the VMM whether the VM is paused.
func (ha *hostAgent) vmPaused(ctx context.Context) (bool, error) {
	p, ok := ha.currentMachine().(driver.Pauser)
	if !ok {
		return false, errors.New("the driver cannot pause this VM")
	}
	return p.Paused(ctx)
}

// wakeFromIdle lets the VM run, pings again and sets the guest's clock,
// which stood still during the pause; the sync mounts resume behind it.
func (ha *hostAgent) wakeFromIdle(ctx context.Context) error {
	p, ok := ha.currentMachine().(driver.Pauser)
	if !ok {
		return errors.New("the driver cannot pause this VM")
	}
	start := time.Now()
	if err := p.Unpause(ctx); err != nil {
		// A lost answer to an unpause that went through: the VM runs, so
		// the rest of the wake (pings, clock, syncs) must still happen.
		if paused, qerr := p.Paused(context.WithoutCancel(ctx)); qerr != nil || paused {
			return fmt.Errorf("wake the VM paused while idle: %w", err)
		}
		slog.Warn("the unpause reported a failure, but the VM runs", "err", err)
	}
	if c := ha.liveClient(); c != nil {
		c.Keepalive().Resume()
		sctx, cancel := context.WithTimeout(ctx, wakeClockWait)
		if err := c.SetTime(sctx, time.Now()); err != nil {
			slog.Warn("set the guest clock after the idle pause", "err", err)
		}
		cancel()
	}
	ha.mu.Lock()
	halted := ha.idle.syncsHalted
	ha.idle.syncsHalted = false
	var back chan struct{}
	if halted {
		back = make(chan struct{})
		ha.idle.syncsBack = back
	}
	ha.mu.Unlock()
	if halted {
		// Not waited for: the docker call that woke the VM must not wait
		// for the sync sessions' reconnect and scan; sync requests do.
		go func() {
			ha.resumeSyncs()
			close(back)
		}()
	}
	ha.events.Emit("idle", control.EventNote, "", fmt.Sprintf("woke from the idle pause in %s", time.Since(start).Round(time.Millisecond)))
	return nil
}

func (ha *hostAgent) resumeSyncs() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ha.files.syncs.Resume(ctx, ""); err != nil {
		slog.Warn("sync mounts did not resume after the idle pause", "err", err)
	}
}

// heldConn releases its hold on the VM when closed.
type heldConn struct {
	net.Conn
	release func()
	once    sync.Once
}

func (c *heldConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite ends the sending side only (a yamux stream's Close does just
// that; reads go on until the guest's end), for the control socket's
// stream relay: a CLI that goes away (an interrupted `vmdock ssh`, an MCP
// run past its timeout) must reach the guest agent as an end of input,
// which ends the command there, even while the command writes nothing.
func (c *heldConn) CloseWrite() error { return c.Conn.Close() }

// heldAction is a control action that reaches the guest: it holds (and
// wakes) the VM while it runs. nil stays nil (the route answers 404).
func (ha *hostAgent) heldAction(act func(context.Context, string) error) func(context.Context, string) error {
	if act == nil {
		return nil
	}
	return func(ctx context.Context, arg string) error {
		release, err := ha.hold(ctx)
		if err != nil {
			return err
		}
		defer release()
		return act(ctx, arg)
	}
}

// heldSyncAction is heldAction for the sync routes: after a wake they
// wait until the sync mounts the pause halted run again.
func (ha *hostAgent) heldSyncAction(act func(context.Context, string) error) func(context.Context, string) error {
	if act == nil {
		return nil
	}
	return ha.heldAction(func(ctx context.Context, arg string) error {
		ha.mu.Lock()
		back := ha.idle.syncsBack
		ha.mu.Unlock()
		if back != nil {
			select {
			case <-back:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return act(ctx, arg)
	})
}

// heldHandler is heldAction for an added route (Options.Routes).
func (ha *hostAgent) heldHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := ha.hold(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer release()
		h.ServeHTTP(w, r)
	})
}
