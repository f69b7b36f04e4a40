package sharedrouter

import (
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A port the user publishes wins over the container-domains router: with
// the default ports the router holds host ports 80 and 443, and
// `docker run -p 80:80` is what a Docker Desktop user types. When a
// forward finds its host port in use, the port forwarder asks Yield;
// the router (in this agent, or the owner this agent registered with)
// closes its listeners on that port, and takes the port again when the
// forward ends (giveBack) or, failing that, on the next retake round.

// retakeEvery is how often the owner tries to bind a port it lacks.
var retakeEvery = 5 * time.Second

// addFrontListener serves ln with scheme's front server; d.mu is held.
func (d *Server) addFrontListener(scheme string, ln net.Listener) {
	port := ln.Addr().(*net.TCPAddr).Port
	d.frontLns[port] = append(d.frontLns[port], ln)
	d.addrs[scheme] = append(d.addrs[scheme], ln.Addr())
	d.serve(d.frontBy[scheme], ln)
}

// Yield gives the router's port up for a published port (the port
// forwarder's Yield); nil when the router does not listen on it.
func (d *Server) Yield(port int) (giveBack func()) {
	d.mu.Lock()
	if d.front != nil {
		lns := d.frontLns[port]
		if len(lns) == 0 {
			d.mu.Unlock()
			return nil
		}
		delete(d.frontLns, port)
		d.yielded[port] = true
		for _, scheme := range []string{"http", "https"} {
			var kept []net.Addr
			for _, a := range d.addrs[scheme] {
				if a.(*net.TCPAddr).Port != port {
					kept = append(kept, a)
				}
			}
			d.addrs[scheme] = kept
		}
		d.mu.Unlock()
		for _, ln := range lns {
			ln.Close()
		}
		slog.Info("domains: the router gave its port to a published port; it takes it back when that port goes", "port", port)
		return func() { d.giveBack(port) }
	}
	registered := d.upstream != nil
	d.mu.Unlock()
	if !registered || !d.ownerListensOn(port) {
		return nil
	}
	if !d.tellOwner(update{Yield: port}) {
		return nil
	}
	return func() { d.tellOwner(update{GiveBack: port}) }
}

// giveBack ends a yield: the owner binds the port again if it is free.
func (d *Server) giveBack(port int) {
	d.mu.Lock()
	delete(d.yielded, port)
	d.mu.Unlock()
	d.retake()
}

// retake binds the ports the owner lacks and has not yielded.
func (d *Server) retake() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.front == nil || d.ctx.Err() != nil {
		return
	}
	for _, p := range []struct {
		scheme string
		port   int
	}{{"http", d.settings.Ports.HTTPPort}, {"https", d.settings.Ports.HTTPSPort}} {
		if p.port == 0 || len(d.frontLns[p.port]) > 0 || d.yielded[p.port] {
			continue
		}
		for _, ip := range d.settings.Binds {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p.port)))
			if err != nil {
				slog.Debug("domains: port still not free", "addr", ip, "port", p.port, "err", err)
				continue
			}
			d.addFrontListener(p.scheme, ln)
			slog.Info("domains: the router took its port back", "addr", ln.Addr())
		}
	}
}

// ownerListensOn asks the owner of the ports (as `vmdock domains` does)
// whether port is one of its own.
func (d *Server) ownerListensOn(port int) bool {
	c, err := net.DialTimeout("unix", filepath.Join(d.settings.Home, registerSock), 2*time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck // a late owner is a no
	if json.NewEncoder(c).Encode(hello{List: true}) != nil {
		return false
	}
	var l struct {
		Listening []string `json:"listening"`
	}
	if json.NewDecoder(c).Decode(&l) != nil {
		return false
	}
	suffix := ":" + strconv.Itoa(port)
	for _, a := range l.Listening {
		if !strings.HasPrefix(a, "dns://") && strings.HasSuffix(a, suffix) {
			return true
		}
	}
	return false
}

// tellOwner sends u on the registration; false when there is none.
func (d *Server) tellOwner(u update) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sendUpstream(u)
}

// sendUpstream writes u to the owner this agent registered with; d.mu is
// held. A failed write ends the registration (keepRole elects again).
func (d *Server) sendUpstream(u update) bool {
	if d.upstream == nil {
		return false
	}
	d.upstream.SetWriteDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	if err := json.NewEncoder(d.upstream).Encode(u); err != nil {
		d.upstream.Close()
		return false
	}
	return true
}
