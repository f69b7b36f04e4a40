package hostagent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/vmdock/vmdock/network/proxy"
	"github.com/vmdock/vmdock/vm/control"
)

// hostClocks reads two of the host's clocks: boot, which runs on while
// the host sleeps, and mono, which stops then (Linux: CLOCK_BOOTTIME and
// CLOCK_MONOTONIC; macOS: CLOCK_MONOTONIC and CLOCK_UPTIME_RAW). nil where
// the host offers no such pair.
type hostClocks func() (boot, mono time.Duration, err error)

// Wake watch bounds: it looks every wakeLook; a host asleep for
// minSleep or more (boot clock ahead of the monotonic one), or this
// process frozen for minFreeze or more (a look that came that much late:
// SIGSTOP, a cgroup freezer), is a wake.
const (
	wakeLook  = time.Second
	minSleep  = time.Second
	minFreeze = 5 * time.Second
)

// wake is what the watch saw: how long the host was away and why.
type wake struct {
	away   time.Duration
	frozen bool // this process stopped, not the host asleep
}

// watchWakes calls woke after each wake of the host, until ctx ends; each
// tick is one look at the clocks.
func watchWakes(ctx context.Context, clocks hostClocks, ticks <-chan time.Time, woke func(wake)) {
	lastBoot, lastMono, err := clocks()
	if err != nil {
		slog.Warn("host clocks unreadable: wakes go unnoticed", "err", err)
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		boot, mono, err := clocks()
		if err != nil {
			continue
		}
		slept := (boot - lastBoot) - (mono - lastMono)
		late := (mono - lastMono) - wakeLook
		lastBoot, lastMono = boot, mono
		switch {
		case slept >= minSleep:
			woke(wake{away: slept})
		case late >= minFreeze:
			woke(wake{away: late, frozen: true})
		}
	}
}

// runWakeWatch follows the host's sleeps for as long as the host agent
// runs: the guest's clock stood still meanwhile and is set at once.
func (ha *hostAgent) runWakeWatch(ctx context.Context) {
	if ha.clocks == nil {
		return
	}
	t := time.NewTicker(wakeLook)
	defer t.Stop()
	watchWakes(ctx, ha.clocks, t.C, func(w wake) { ha.afterWake(ctx, w) })
}

// afterWake sets the guest's clock to the host's. A VM paused while idle
// is left paused: the wake from that pause sets the clock, and the host's
// own wake is no use of the VM.
func (ha *hostAgent) afterWake(ctx context.Context, w wake) {
	what := "the host slept"
	if w.frozen {
		what = "the host agent was frozen"
	}
	if ha.idle.monitor.Paused() {
		slog.Info(what+"; the VM is paused while idle, its wake sets the clock", "for", w.away.Round(time.Millisecond))
		return
	}
	// Every network path is looked at now, the costlier checks included:
	// the host may have woken on another network.
	ha.watch.dog.kick()
	ha.rereadHostSettings()
	if err := ha.setGuestClock(ctx); err != nil {
		slog.Warn(what+"; setting the guest clock failed", "for", w.away.Round(time.Millisecond), "err", err)
		return
	}
	slog.Info(what+"; guest clock set", "for", w.away.Round(time.Millisecond))
}

// setGuestClock sets the guest's wall clock to the host's now, through
// the live agent session; nothing without one (a reconnect sets it).
func (ha *hostAgent) setGuestClock(ctx context.Context) error {
	c := ha.liveClient()
	if c == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.SetTime(sctx, time.Now())
}

// rereadHostSettings reads the host's proxy again after a wake (the
// host's DNS needs no re-read: the stack asks the host's resolvers as
// configured at each query). A changed proxy is logged and told to
// followers: the guest's daemons keep the one they started with until
// the next start.
func (ha *hostAgent) rereadHostSettings() {
	now, err := readCorpNet(ha.cfg, os.Getenv, proxy.System)
	if err != nil {
		slog.Warn("after the wake: the host's settings are unreadable", "err", err)
		return
	}
	ha.mu.Lock()
	was := fmt.Sprintf("%+v", ha.boot.corp.proxy.Masked())
	ha.mu.Unlock()
	if is := fmt.Sprintf("%+v", now.proxy.Masked()); is != was {
		text := fmt.Sprintf("the host's proxy changed while it slept (now %s, was %s); the guest keeps the old one until `vmdock restart`", is, was)
		slog.Warn(text)
		ha.events.Emit("host-settings", control.EventNote, "", text)
	}
}
