// Package sharedrouter serves container domains for every profile from the one
// host agent that holds the router's ports.
//
// Only one process can hold the router's ports, so the host agents share
// them: the first to bind the ports owns them and serves every profile;
// each other agent registers with it over $VMDOCK_HOME/_domains.sock and
// streams its containers there, and the owner proxies that profile's
// names to the agent's own router on <instance>/domains.sock (the agent
// holds its VM for each request and dials its guest). When the owner
// stops, the registration connections end and the others bind the ports
// again: one of them wins, the rest register with it.
package sharedrouter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vmdock/vmdock/network/domains"
	"github.com/vmdock/vmdock/network/domains/dockerapi"
	"github.com/vmdock/vmdock/network/domains/localca"
	"github.com/vmdock/vmdock/network/domains/router"
)

// registerSock is where the owner of the ports takes registrations.
const registerSock = domains.SocketName

// localSockName is each agent's own router, under its instance folder.
const localSockName = "domains.sock"

// Ports are the loopback ports the shared router listens on (the
// domains section of the config); 0 for HTTP or HTTPS is any free port,
// 0 for DNS is no DNS responder.
type Ports struct {
	HTTPPort  int
	HTTPSPort int
	DNSPort   int
}

// Settings are what the container-domains router of one host agent
// needs; tests fill them with loopback servers.
type Settings struct {
	Profile string
	// Home is $VMDOCK_HOME: the CA, the registration socket and every
	// profile's instance folder.
	Home  string
	Ports Ports
	// Binds are the loopback addresses each port listens on; the first
	// must bind, the others may fail (a host without IPv6 loopback).
	Binds []string
	// Dial reaches a container's address in the guest.
	Dial router.DialFunc
	// Names is where the containers come from; nil: docker's API through
	// Docker.
	Names NameSource
	// Docker reaches the guest's docker socket, for the names.
	Docker func(ctx context.Context) (net.Conn, error)
	// Hold makes each request a use of the VM (nil: none).
	Hold func(ctx context.Context) (func(), error)
	// ValidProfile checks the profile another agent registers with: it
	// names a socket under Home, so a bad one must not get that far.
	ValidProfile func(profile string) error
	// Note tells the user, once per problem, what Start could not set up
	// (nil: logged).
	Note func(string)
}

func (s Settings) localSock(profile string) string {
	return filepath.Join(s.Home, profile, localSockName)
}

func (s Settings) note(text string) {
	if s.Note == nil {
		slog.Info(text)
		return
	}
	s.Note(text)
}

// NameSource is a runtime's containers and the event stream that says
// when to read them again: dockerapi for docker, nerdctlapi for
// containerd.
type NameSource interface {
	Containers(ctx context.Context) ([]domains.Container, error)
	// Watch calls changed once the stream is open and after each event
	// that can change a name, until ctx ends or the stream breaks.
	Watch(ctx context.Context, changed func()) error
}

// Server is one agent's part: its own router, and while it owns the
// ports the front router for every profile.
type Server struct {
	settings Settings
	ca       *localca.CA
	local    *router.Router
	localSrv *http.Server
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu         sync.Mutex
	containers []domains.Container // the latest list, for a new front or owner
	front      *router.Router      // non-nil while this agent owns the ports
	frontSrvs  []*http.Server
	frontBy    map[string]*http.Server // "http"/"https" → its server (yield.go)
	frontLns   map[int][]net.Listener  // port → its listeners
	yielded    map[int]bool            // ports given to published ports
	dns        []net.PacketConn
	addrs      map[string][]net.Addr // "http"/"https" → where the front listens
	regLn      net.Listener
	members    map[net.Conn]string // registered agents' connections → profile
	upstream   net.Conn            // the registration with the owner
}

// Start serves the profile's names. It fails only when nothing could be
// set up; a port nobody of vmdock holds and the OS refuses is a Note and
// the rest goes on, so start never stops over it.
func Start(s Settings) (*Server, error) {
	if s.ValidProfile == nil {
		return nil, errors.New("container domains: no profile check for registrations")
	}
	ca, err := localca.Open(s.Home)
	if err != nil {
		return nil, err
	}
	local := router.New()
	local.KeepForwarded = true
	local.Register(s.Profile, s.Dial)
	sock := s.localSock(s.Profile)
	os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("container domains: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("container domains: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Server{settings: s, ca: ca, local: local, ctx: ctx, cancel: cancel, addrs: map[string][]net.Addr{}}
	d.localSrv = local.Server(nil)
	d.localSrv.Handler = d.held(local)
	d.serve(d.localSrv, ln)

	for _, n := range d.elect() {
		s.note(n)
	}
	d.wg.Add(2)
	go func() { defer d.wg.Done(); d.keepRole() }()
	names := s.Names
	if names == nil {
		names = dockerapi.New(s.Docker)
	}
	go func() {
		defer d.wg.Done()
		watchNames(ctx, names, d.publish)
	}()
	return d, nil
}

func (d *Server) serve(srv *http.Server, ln net.Listener) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := router.Serve(srv, ln); err != nil {
			slog.Warn("domains: serve", "addr", ln.Addr(), "err", err)
		}
	}()
}

// held makes each request (a WebSocket for as long as it is open) a use
// of this agent's VM, waking a paused one first.
func (d *Server) held(h http.Handler) http.Handler {
	if d.settings.Hold == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		release, err := d.settings.Hold(req.Context())
		if err != nil {
			http.Error(w, "vmdock: the VM is not available: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer release()
		h.ServeHTTP(w, req)
	})
}

// publish takes a new list of this profile's containers to every router
// that serves them.
func (d *Server) publish(cs []domains.Container) {
	t := domains.Build(d.settings.Profile, cs)
	for _, p := range t.Problems {
		slog.Info("domains: " + p)
	}
	d.local.SetTable(d.settings.Profile, t) //nolint:errcheck // registered at start
	d.mu.Lock()
	defer d.mu.Unlock()
	d.containers = cs
	if d.front != nil {
		d.front.SetTable(d.settings.Profile, t) //nolint:errcheck // registered in own
	}
	d.sendUpstream(update{Containers: cs})
}

// watchNames calls publish with the running containers when the runtime's
// event stream opens and after each event (several events while a list
// runs make one more list, not several). A list that fails is tried
// again after a pause, growing while it keeps failing: with no event to
// come, a container that went while the list ran would keep its name.
func watchNames(ctx context.Context, c NameSource, publish func([]domains.Container)) {
	kick := make(chan struct{}, 1)
	changed := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	go watchEvents(ctx, c, changed)
	var retry <-chan time.Time
	retryIn := listRetry
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-retry:
		}
		retry = nil
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cs, err := c.Containers(lctx)
		cancel()
		if err != nil {
			slog.Debug("domains: list containers", "err", err, "again in", retryIn)
			retry = time.After(retryIn)
			retryIn = min(2*retryIn, 30*time.Second)
			continue
		}
		retryIn = listRetry
		publish(cs)
	}
}

// watchEvents keeps the runtime's event stream open until ctx ends,
// opening it again after a pause that grows while it keeps breaking.
func watchEvents(ctx context.Context, c NameSource, changed func()) {
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
		slog.Debug("domains: container events ended; watching again", "err", err, "in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// listRetry is the first pause before a failed list is tried again.
var listRetry = 500 * time.Millisecond

// Close gives up the ports and the registration: registered agents see
// their connections end first, then the ports are free for one of them.
func (d *Server) Close() {
	d.cancel()
	d.mu.Lock()
	reg, members, srvs, up, dns := d.regLn, d.members, d.frontSrvs, d.upstream, d.dns
	d.members = nil
	d.mu.Unlock()
	for _, pc := range dns {
		pc.Close()
	}
	if reg != nil {
		reg.Close()
	}
	for c := range members {
		c.Close()
	}
	for _, s := range srvs {
		s.Close()
	}
	if up != nil {
		up.Close()
	}
	d.localSrv.Close()
	os.Remove(d.settings.localSock(d.settings.Profile))
	d.wg.Wait()
}
