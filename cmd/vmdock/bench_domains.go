package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/bench"
	"github.com/vmdock/vmdock/network/domains"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/store"
)

// benchDialGuest is the domains section's agent tunnel: a raw agent
// stream from the host agent (the one `vmdock ssh` runs its exec on,
// through ha.sock) that asks the guest agent to dial addr, the same dial
// request on the same yamux session the router's proxy makes through
// the host agent's agentLink.Dial. Nothing of the router is in front of
// it: an HTTP request on it goes straight to the container.
func benchDialGuest(ctl *control.Client) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		conn, err := ctl.OpenStream(ctx)
		if err != nil {
			return nil, err
		}
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		defer stop()
		if err := agent.WriteJSONLine(conn, agent.Request{Op: agent.OpDial, Network: "tcp", Address: addr}); err != nil {
			conn.Close()
			return nil, fmt.Errorf("dial guest %s: %w", addr, err)
		}
		if _, err := agent.ReadResponse(conn); err != nil {
			conn.Close()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("dial guest %s: %w", addr, err)
		}
		return conn, nil
	}
}

// benchDomainRoute asks the router that owns the domains ports (any
// profile's host agent, over $VMDOCK_HOME's registration socket) for the
// name of the container id of profile inst.
func benchDomainRoute(inst *store.Instance) func(ctx context.Context, id string) (bench.DomainRoute, bool, error) {
	sock := filepath.Join(filepath.Dir(inst.Dir), domains.SocketName)
	return func(ctx context.Context, id string) (bench.DomainRoute, bool, error) {
		l, err := askRouter(ctx, sock)
		if err != nil {
			return bench.DomainRoute{}, false, fmt.Errorf("no router answers on %s (domains.enabled false, or the host agent got no port: see `vmdock start`): %w", sock, err)
		}
		return routeOf(l, inst.Name, id)
	}
}

// routeOf picks the container's own name (not a compose or label name)
// and the router's http address, loopback IPv4 first.
func routeOf(l domainsList, profile, id string) (bench.DomainRoute, bool, error) {
	var rt bench.DomainRoute
	found := false
	for _, r := range l.Routes {
		if r.Profile != profile || r.Source != domains.FromContainerName || !sameID(r.ContainerID, id) {
			continue
		}
		rt, found = bench.DomainRoute{Name: r.Name, GuestAddr: r.Addr, Problem: r.Problem}, true
		break
	}
	if !found {
		return rt, false, nil
	}
	for _, a := range l.Listening {
		hp, ok := strings.CutPrefix(a, "http://")
		if !ok {
			continue
		}
		if rt.HTTPAddr == "" || strings.HasPrefix(hp, "127.0.0.1:") {
			rt.HTTPAddr = hp
		}
	}
	return rt, true, nil
}

// sameID matches a full container ID against a short one either way.
func sameID(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}
