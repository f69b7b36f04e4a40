package hostagent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/vmdock/vmdock/network/domains"
	"github.com/vmdock/vmdock/network/domains/dockerapi"
	"github.com/vmdock/vmdock/network/domains/localca"
	"github.com/vmdock/vmdock/network/domains/router"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
)

// domainsSpec is what the container-domains router of one host agent
// needs; tests fill it with loopback servers.
type domainsSpec struct {
	profile string
	home    string // $VMDOCK_HOME: the CA lives there
	cfg     config.DomainsConfig
	binds   []string // loopback addresses each port listens on
	// dial reaches a container's address in the guest.
	dial router.DialFunc
	// docker reaches the guest's docker socket, for the names.
	docker func(ctx context.Context) (net.Conn, error)
	// hold makes each request a use of the VM (nil: none).
	hold func(ctx context.Context) (func(), error)
}

// domainsServer is a running router and the watch feeding it names.
type domainsServer struct {
	router  *router.Router
	servers []*http.Server
	addrs   map[string][]net.Addr // "http"/"https" → where it listens
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// startDomains serves the profile's names. It fails only when nothing
// could be set up; a port the OS refuses comes back as a note and the
// rest goes on, so start never stops over it.
//
// This host agent owns the ports it binds and serves only its own
// profile: a second profile's agent finds them taken and says so. Handing
// the ports over, or one router for several agents, is not built yet
// (the router itself serves any number of registered profiles).
func startDomains(spec domainsSpec) (*domainsServer, []string, error) {
	ca, err := localca.Open(spec.home)
	if err != nil {
		return nil, nil, err
	}
	r := router.New()
	r.Register(spec.profile, spec.dial)
	var h http.Handler = r
	if spec.hold != nil {
		h = heldHandler(r, spec.hold)
	}
	d := &domainsServer{router: r, addrs: map[string][]net.Addr{}}
	var notes []string
	for _, p := range []struct {
		scheme, field string
		port          int
		getCert       bool
	}{
		{"http", "httpPort", spec.cfg.HTTPPort, false},
		{"https", "httpsPort", spec.cfg.HTTPSPort, true},
	} {
		var getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
		if p.getCert {
			getCert = ca.GetCertificate
		}
		srv := r.Server(getCert)
		srv.Handler = h
		for i, ip := range spec.binds {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p.port)))
			if err != nil {
				if i == 0 {
					notes = append(notes, portNote(p.field, p.port, err))
					break
				}
				// a host without IPv6 loopback still serves on 127.0.0.1
				slog.Debug("domains: listen", "addr", ip, "port", p.port, "err", err)
				continue
			}
			d.addrs[p.scheme] = append(d.addrs[p.scheme], ln.Addr())
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				if err := router.Serve(srv, ln); err != nil {
					slog.Warn("domains: serve", "addr", ln.Addr(), "err", err)
				}
			}()
		}
		d.servers = append(d.servers, srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		watchNames(ctx, spec.profile, r, dockerapi.New(spec.docker))
	}()
	return d, notes, nil
}

// portNote is the one line start prints for a port the router cannot
// have, naming the config field that moves it.
func portNote(field string, port int, err error) string {
	switch {
	case errors.Is(err, syscall.EACCES):
		return fmt.Sprintf("container domains: the OS refused port %d (domains.%s; ports below 1024 need root here): set domains.%s to 1024 or above, e.g. %d, for http(s)://<name>.%s:<port>",
			port, field, field, port+8000, domains.Suffix)
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Sprintf("container domains: port %d (domains.%s) is in use, by another server or another profile's vmdock; this profile's names are not served on it (set domains.%s to a free port)",
			port, field, field)
	}
	return fmt.Sprintf("container domains: cannot listen on port %d (domains.%s): %v", port, field, err)
}

// heldHandler makes each request (a WebSocket for as long as it is open)
// a use of the VM, waking a paused one first.
func heldHandler(h http.Handler, hold func(context.Context) (func(), error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		release, err := hold(req.Context())
		if err != nil {
			http.Error(w, "vmdock: the VM is not available: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer release()
		h.ServeHTTP(w, req)
	})
}

// watchNames keeps the router's table for profile current: a fresh list
// of containers when docker's event stream opens and after each event
// (several events while a list runs make one more list, not several).
func watchNames(ctx context.Context, profile string, r *router.Router, c *dockerapi.Client) {
	kick := make(chan struct{}, 1)
	changed := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	go func() {
		backoff := 250 * time.Millisecond
		for ctx.Err() == nil {
			opened := time.Now()
			err := c.Watch(ctx, changed)
			if ctx.Err() != nil {
				return
			}
			if time.Since(opened) > 10*time.Second {
				backoff = 250 * time.Millisecond
			}
			slog.Debug("domains: docker events ended; watching again", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(2*backoff, 10*time.Second)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cs, err := c.Containers(lctx)
		cancel()
		if err != nil {
			slog.Debug("domains: list containers", "err", err)
			continue
		}
		t := domains.Build(profile, cs)
		for _, p := range t.Problems {
			slog.Info("domains: " + p)
		}
		if err := r.SetTable(profile, t); err != nil {
			slog.Warn("domains", "err", err)
		}
	}
}

// Close stops the listeners and the watch.
func (d *domainsServer) Close() {
	d.cancel()
	for _, s := range d.servers {
		s.Close()
	}
	d.wg.Wait()
}

// stepDomains serves http(s)://<name>.vmdock.localhost for this profile's
// containers. Nothing here fails the start: what cannot run is a note.
func (ha *hostAgent) stepDomains(context.Context) error {
	if !ha.cfg.Domains.Enabled {
		return nil
	}
	note := func(s string) { ha.events.Emit("domains", control.EventNote, "", s) }
	if ha.cfg.Runtime != config.RuntimeDocker {
		note("container domains: names for the " + ha.cfg.Runtime + " runtime are not built yet")
		return nil
	}
	d, notes, err := startDomains(domainsSpec{
		profile: ha.inst.Name,
		home:    filepath.Dir(ha.inst.Dir),
		cfg:     ha.cfg.Domains,
		binds:   []string{"127.0.0.1", "::1"},
		dial:    ha.link.Dial,
		docker: func(ctx context.Context) (net.Conn, error) {
			return ha.link.Dial(ctx, "unix", guestDockerSocket)
		},
		hold: ha.hold,
	})
	if err != nil {
		note("container domains are off: " + err.Error())
		return nil
	}
	for _, n := range notes {
		note(n)
	}
	ha.mu.Lock()
	ha.domains = d
	ha.mu.Unlock()
	return nil
}

func (ha *hostAgent) undoDomains(context.Context) error {
	ha.mu.Lock()
	d := ha.domains
	ha.domains = nil
	ha.mu.Unlock()
	if d != nil {
		d.Close()
	}
	return nil
}
