package remotehelper

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/internal/connpipe"
)

// offerHostPorts listens on the bridge gateway at each host port and
// relays every connection to the laptop's loopback, over the session. A
// helper of a lost session may hold a port until its keepalive ends it, so
// each listen is tried again until it succeeds.
func (h *helper) offerHostPorts(ctx context.Context) {
	if len(h.opts.HostPorts) == 0 {
		return
	}
	var gw string
	for delay := time.Second; ; delay = min(2*delay, 15*time.Second) {
		var err error
		if gw, err = h.engine.bridgeGateway(ctx); err == nil {
			break
		}
		h.log.Warn("host access: no bridge gateway yet", "err", err)
		if !sleep(ctx, delay) {
			return
		}
	}
	for _, port := range h.opts.HostPorts {
		go h.offerHostPort(ctx, gw, port)
	}
}

func (h *helper) offerHostPort(ctx context.Context, gw string, port int) {
	addr := net.JoinHostPort(gw, strconv.Itoa(port))
	var l net.Listener
	for delay := 500 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		var err error
		var lc net.ListenConfig
		if l, err = lc.Listen(ctx, "tcp", addr); err == nil {
			break
		}
		h.log.Warn("host access: listen", "addr", addr, "err", err)
		if !sleep(ctx, delay) {
			return
		}
	}
	h.log.Info("host access: the laptop's port is offered", "addr", addr)
	context.AfterFunc(ctx, func() { l.Close() })
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go h.relayToHost(c, port)
	}
}

// relayToHost opens a host-dial stream for port and pipes c through it.
func (h *helper) relayToHost(c net.Conn, port int) {
	defer c.Close()
	st, err := h.sess.OpenStream()
	if err != nil {
		return
	}
	if err := agent.WriteJSONLine(st, agent.Request{Op: agent.OpHostDial, Network: "tcp", Port: port}); err != nil {
		st.Close()
		return
	}
	if resp, err := agent.ReadResponse(st); err != nil || !resp.OK {
		h.log.Debug("host access: the laptop refused", "port", port, "err", err)
		st.Close()
		return
	}
	connpipe.Pipe(c, connpipe.CloseIsCloseWrite(st))
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
