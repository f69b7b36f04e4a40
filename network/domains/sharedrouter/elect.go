package sharedrouter

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/vmdock/vmdock/network/domains"
	"github.com/vmdock/vmdock/network/domains/dnsserver"
	"github.com/vmdock/vmdock/network/domains/router"
)

// elect makes this agent the owner of the ports if it can bind them, else
// registers it with the owner. What could not be done is the notes.
func (d *Server) elect() []string {
	var notes []string
	for try := 0; try < 10 && d.ctx.Err() == nil; try++ {
		lns, ns, busy := d.listen()
		if len(lns) > 0 {
			dnsNotes, err := d.own(lns)
			if err == nil {
				return append(ns, dnsNotes...)
			}
			ns = append(ns, "container domains: "+err.Error())
		}
		if d.join() {
			return nil
		}
		notes = ns
		if !busy {
			break // refused, not taken: trying again at once changes nothing
		}
		// an owner that is stopping frees the ports a moment after its
		// registrations end; a new owner opens its socket a moment after
		// it binds them
		time.Sleep(100 * time.Millisecond)
	}
	return notes
}

// listen binds the ports on every loopback address; none bound: not
// the owner. busy: a port is in use (by an owner, or one handing over).
func (d *Server) listen() (lns map[string][]net.Listener, notes []string, busy bool) {
	lns = map[string][]net.Listener{}
	for _, p := range []struct {
		scheme, field string
		port          int
	}{{"http", "httpPort", d.settings.Ports.HTTPPort}, {"https", "httpsPort", d.settings.Ports.HTTPSPort}} {
		for i, ip := range d.settings.Binds {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p.port)))
			if err != nil {
				if i == 0 {
					notes = append(notes, portNote(p.field, p.port, err))
					busy = busy || errors.Is(err, syscall.EADDRINUSE)
					break
				}
				// a host without IPv6 loopback still serves on 127.0.0.1
				slog.Debug("domains: listen", "addr", ip, "port", p.port, "err", err)
				continue
			}
			lns[p.scheme] = append(lns[p.scheme], ln)
		}
	}
	return lns, notes, busy
}

// own serves the front router on lns, the DNS responder, and takes
// registrations. A DNS port it cannot have is a note.
func (d *Server) own(lns map[string][]net.Listener) ([]string, error) {
	closeAll := func() {
		for _, ls := range lns {
			for _, ln := range ls {
				ln.Close()
			}
		}
	}
	reg, err := d.listenRegistrations()
	if err != nil {
		closeAll()
		return nil, err
	}
	front := router.New()
	front.Register(d.settings.Profile, d.settings.Dial)
	d.mu.Lock()
	if d.ctx.Err() != nil { // Close ran meanwhile
		d.mu.Unlock()
		reg.Close()
		closeAll()
		return nil, d.ctx.Err()
	}
	front.SetTable(d.settings.Profile, domains.Build(d.settings.Profile, d.containers)) //nolint:errcheck // registered above
	d.front, d.regLn, d.members = front, reg, map[net.Conn]string{}
	h := d.frontHandler(front)
	// both servers, even for a port not bound now: retake binds it later
	d.frontBy, d.frontLns, d.yielded = map[string]*http.Server{}, map[int][]net.Listener{}, map[int]bool{}
	for _, scheme := range []string{"http", "https"} {
		var getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
		if scheme == "https" {
			getCert = d.ca.GetCertificate
		}
		srv := front.Server(getCert)
		srv.Handler = h
		d.frontSrvs = append(d.frontSrvs, srv)
		d.frontBy[scheme] = srv
		for _, ln := range lns[scheme] {
			d.addFrontListener(scheme, ln)
		}
	}
	notes := d.serveDNS()
	d.mu.Unlock()
	slog.Info("domains: this agent owns the router's ports", "addrs", fmt.Sprint(d.addrs))
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			c, err := reg.Accept()
			if err != nil {
				return
			}
			d.wg.Add(1)
			go func() { defer d.wg.Done(); d.member(front, c) }()
		}
	}()
	return notes, nil
}

// listenRegistrations opens the registration socket, the owner's.
func (d *Server) listenRegistrations() (net.Listener, error) {
	sock := filepath.Join(d.settings.Home, registerSock)
	os.Remove(sock) // a crashed owner's; the ports say who owns now
	reg, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("registration socket: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		reg.Close()
		return nil, fmt.Errorf("registration socket: %w", err)
	}
	return reg, nil
}

// frontHandler serves the front router, holding this agent's VM for its
// own names.
func (d *Server) frontHandler(front *router.Router) http.Handler {
	own := d.held(front)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// this VM's names hold it here; another profile's agent holds its
		// own behind its socket
		if rt, ok := front.Table().Lookup(req.Host); ok && rt.Profile == d.settings.Profile {
			own.ServeHTTP(w, req)
			return
		}
		front.ServeHTTP(w, req)
	})
}

// serveDNS answers *.vmdock.localhost on the DNS port, for the system
// resolver (see dnsserver); d.mu is held.
func (d *Server) serveDNS() []string {
	port := d.settings.Ports.DNSPort
	if port == 0 {
		return nil
	}
	for i, ip := range d.settings.Binds {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			if i == 0 {
				return []string{portNote("dnsPort", port, err)}
			}
			slog.Debug("domains: DNS listen", "addr", ip, "port", port, "err", err)
			continue
		}
		d.dns = append(d.dns, pc)
		d.addrs["dns"] = append(d.addrs["dns"], pc.LocalAddr())
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := dnsserver.Serve(pc); err != nil {
				slog.Warn("domains: DNS", "addr", pc.LocalAddr(), "err", err)
			}
		}()
	}
	return nil
}

// listening is where the front listens while this agent owns the ports.
func (d *Server) listening(scheme string) []net.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]net.Addr(nil), d.addrs[scheme]...)
}

// keepRole waits for this agent's role to end (the owner it registered
// with went away, or there was none) and elects again.
func (d *Server) keepRole() {
	for {
		d.mu.Lock()
		owner, up := d.front != nil, d.upstream
		d.mu.Unlock()
		switch {
		case owner:
			// a port another program held at the election, or one given
			// back while it was busy, is bound once it is free
			for {
				select {
				case <-d.ctx.Done():
					return
				case <-time.After(retakeEvery):
					d.retake()
				}
			}
		case up != nil:
			io.Copy(io.Discard, up) //nolint:errcheck // the owner never writes: this waits for its end
			up.Close()
			d.mu.Lock()
			d.upstream = nil
			d.mu.Unlock()
		default:
			// the ports are held by something else, or refused: try now
			// and then, so a freed port is taken
			select {
			case <-d.ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
		}
		if d.ctx.Err() != nil {
			return
		}
		for _, n := range d.elect() {
			slog.Debug(n)
		}
	}
}

// portNote is the one line start prints for a port the router cannot
// have, naming the config field that moves it.
func portNote(field string, port int, err error) string {
	switch {
	case errors.Is(err, syscall.EACCES):
		return fmt.Sprintf("container domains: the OS refused port %d (domains.%s; ports below 1024 need root here): set domains.%s to 1024 or above, e.g. %d, for http(s)://<name>.%s:<port>",
			port, field, field, port+8000, domains.Suffix)
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Sprintf("container domains: port %d (domains.%s) is in use (a published port or another server); the router takes it once it is free, or set domains.%s to a free port",
			port, field, field)
	}
	return fmt.Sprintf("container domains: cannot listen on port %d (domains.%s): %v", port, field, err)
}
