package remotehelper

import (
	"context"
	"io"
	"net"
	"time"

	"github.com/vmdock/vmdock/agent"
)

// watchPorts streams the published ports as the agent's port events: the
// full set, the synced mark, then each change, re-listed on every
// container event (the events name containers, not ports).
func (h *helper) watchPorts(ctx context.Context, st net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	context.AfterFunc(ctx, func() { st.Close() })
	go func() {
		// The host ends the watch by closing its side.
		_, _ = io.Copy(io.Discard, st)
		cancel()
	}()
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	go h.followEvents(ctx, poke)
	var sent map[published]bool
	for {
		now, err := h.engine.publishedPorts(ctx)
		if err != nil {
			h.log.Warn("list published ports", "err", err)
		} else {
			if !h.sendDiff(st, sent, now) {
				return
			}
			if sent == nil && agent.WriteJSONLine(st, agent.PortEvent{Synced: true}) != nil {
				return
			}
			sent = now
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-time.After(30 * time.Second): // a missed event heals here
		}
	}
}

// sendDiff writes the ports gone and the ports new since sent; false: the
// stream is gone.
func (h *helper) sendDiff(st net.Conn, sent, now map[published]bool) bool {
	for p := range sent {
		if !now[p] && agent.WriteJSONLine(st, agent.PortEvent{Added: false, Proto: p.Proto, IP: p.IP, Port: p.Port}) != nil {
			return false
		}
	}
	for p := range now {
		if !sent[p] && agent.WriteJSONLine(st, agent.PortEvent{Added: true, Proto: p.Proto, IP: p.IP, Port: p.Port}) != nil {
			return false
		}
	}
	return true
}

// followEvents pokes on every container event, following the engine's
// event stream again after it ends, with a growing pause.
func (h *helper) followEvents(ctx context.Context, poke func()) {
	delay := 250 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := h.engine.events(ctx, poke)
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("engine events", "err", err)
		poke()
		if time.Since(start) > time.Minute {
			delay = 250 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}
