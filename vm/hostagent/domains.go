package hostagent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/network/domains"
	"github.com/vmdock/vmdock/network/domains/dnsserver"
	"github.com/vmdock/vmdock/network/domains/dockerapi"
	"github.com/vmdock/vmdock/network/domains/localca"
	"github.com/vmdock/vmdock/network/domains/nerdctlapi"
	"github.com/vmdock/vmdock/network/domains/router"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/store"
)

// Container domains. Only one process can hold the router's
// ports, so the host agents share them: the first to bind the ports owns
// them and serves every profile; each other agent registers with it over
// $VMDOCK_HOME/_domains.sock and streams its containers there, and the
// owner proxies that profile's names to the agent's own router on
// <instance>/domains.sock (the agent holds its VM for each request and
// dials its guest). When the owner stops, the registration connections
// end and the others bind the ports again: one of them wins, the rest
// register with it.

// registerSock is where the owner of the ports takes registrations.
const registerSock = domains.SocketName

// localSockName is each agent's own router, under its instance folder.
const localSockName = "domains.sock"

// domainsSpec is what the container-domains router of one host agent
// needs; tests fill it with loopback servers.
type domainsSpec struct {
	profile string
	home    string // $VMDOCK_HOME: the CA and the registration socket
	cfg     config.DomainsConfig
	binds   []string // loopback addresses each port listens on
	// dial reaches a container's address in the guest.
	dial router.DialFunc
	// names is where the containers come from; nil: docker's API through
	// docker.
	names nameSource
	// docker reaches the guest's docker socket, for the names.
	docker func(ctx context.Context) (net.Conn, error)
	// hold makes each request a use of the VM (nil: none).
	hold func(ctx context.Context) (func(), error)
}

func (s domainsSpec) localSock(profile string) string {
	return filepath.Join(s.home, profile, localSockName)
}

// nameSource is a runtime's containers and the event stream that says
// when to read them again: dockerapi for docker, nerdctlapi for
// containerd.
type nameSource interface {
	Containers(ctx context.Context) ([]domains.Container, error)
	// Watch calls changed once the stream is open and after each event
	// that can change a name, until ctx ends or the stream breaks.
	Watch(ctx context.Context, changed func()) error
}

// domainsServer is one agent's part: its own router, and while it owns
// the ports the front router for every profile.
type domainsServer struct {
	spec     domainsSpec
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
	frontBy    map[string]*http.Server // "http"/"https" → its server (domainsyield.go)
	frontLns   map[int][]net.Listener  // port → its listeners
	yielded    map[int]bool            // ports given to published ports
	dns        []net.PacketConn
	addrs      map[string][]net.Addr // "http"/"https" → where the front listens
	regLn      net.Listener
	members    map[net.Conn]string // registered agents' connections → profile
	upstream   net.Conn            // the registration with the owner
}

// startDomains serves the profile's names. It fails only when nothing
// could be set up; a port nobody of vmdock holds and the OS refuses comes
// back as a note and the rest goes on, so start never stops over it.
func startDomains(spec domainsSpec) (*domainsServer, []string, error) {
	ca, err := localca.Open(spec.home)
	if err != nil {
		return nil, nil, err
	}
	local := router.New()
	local.KeepForwarded = true
	local.Register(spec.profile, spec.dial)
	sock := spec.localSock(spec.profile)
	os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, nil, fmt.Errorf("container domains: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("container domains: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &domainsServer{spec: spec, ca: ca, local: local, ctx: ctx, cancel: cancel, addrs: map[string][]net.Addr{}}
	d.localSrv = local.Server(nil)
	d.localSrv.Handler = d.held(local)
	d.serve(d.localSrv, ln)

	notes := d.elect()
	d.wg.Add(2)
	go func() { defer d.wg.Done(); d.keepRole() }()
	names := spec.names
	if names == nil {
		names = dockerapi.New(spec.docker)
	}
	go func() {
		defer d.wg.Done()
		watchNames(ctx, names, d.publish)
	}()
	return d, notes, nil
}

func (d *domainsServer) serve(srv *http.Server, ln net.Listener) {
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
func (d *domainsServer) held(h http.Handler) http.Handler {
	if d.spec.hold == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		release, err := d.spec.hold(req.Context())
		if err != nil {
			http.Error(w, "vmdock: the VM is not available: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer release()
		h.ServeHTTP(w, req)
	})
}

// elect makes this agent the owner of the ports if it can bind them, else
// registers it with the owner. What could not be done is the notes.
func (d *domainsServer) elect() []string {
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
func (d *domainsServer) listen() (lns map[string][]net.Listener, notes []string, busy bool) {
	lns = map[string][]net.Listener{}
	for _, p := range []struct {
		scheme, field string
		port          int
	}{{"http", "httpPort", d.spec.cfg.HTTPPort}, {"https", "httpsPort", d.spec.cfg.HTTPSPort}} {
		for i, ip := range d.spec.binds {
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
func (d *domainsServer) own(lns map[string][]net.Listener) ([]string, error) {
	closeAll := func() {
		for _, ls := range lns {
			for _, ln := range ls {
				ln.Close()
			}
		}
	}
	sock := filepath.Join(d.spec.home, registerSock)
	os.Remove(sock) // a crashed owner's; the ports say who owns now
	reg, err := net.Listen("unix", sock)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("registration socket: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		reg.Close()
		closeAll()
		return nil, fmt.Errorf("registration socket: %w", err)
	}
	front := router.New()
	front.Register(d.spec.profile, d.spec.dial)
	d.mu.Lock()
	if d.ctx.Err() != nil { // Close ran meanwhile
		d.mu.Unlock()
		reg.Close()
		closeAll()
		return nil, d.ctx.Err()
	}
	front.SetTable(d.spec.profile, domains.Build(d.spec.profile, d.containers)) //nolint:errcheck // registered above
	d.front, d.regLn, d.members = front, reg, map[net.Conn]string{}
	own := d.held(front)
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// this VM's names hold it here; another profile's agent holds its
		// own behind its socket
		if rt, ok := front.Table().Lookup(req.Host); ok && rt.Profile == d.spec.profile {
			own.ServeHTTP(w, req)
			return
		}
		front.ServeHTTP(w, req)
	})
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

// serveDNS answers *.vmdock.localhost on the DNS port, for the system
// resolver (see dnsserver); d.mu is held.
func (d *domainsServer) serveDNS() []string {
	port := d.spec.cfg.DNSPort
	if port == 0 {
		return nil
	}
	for i, ip := range d.spec.binds {
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
func (d *domainsServer) listening(scheme string) []net.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]net.Addr(nil), d.addrs[scheme]...)
}

// hello and update are the registration protocol: one JSON value a line,
// a hello then the agent's containers each time they change.
type hello struct {
	Profile string `json:"profile,omitempty"`
	// List asks for the router's table instead (`vmdock domains`), so
	// listing names wakes no paused VM.
	List bool `json:"list,omitempty"`
}

type update struct {
	Containers []domains.Container `json:"containers"`
	// Yield asks the owner to give one of its ports up to a port the
	// agent publishes, GiveBack to take it again (domainsyield.go); such
	// a message carries no containers.
	Yield    int `json:"yield,omitempty"`
	GiveBack int `json:"giveBack,omitempty"`
}

// member serves one registered agent until its connection ends.
func (d *domainsServer) member(front *router.Router, c net.Conn) {
	defer c.Close()
	dec := json.NewDecoder(c)
	var h hello
	if err := dec.Decode(&h); err != nil {
		return
	}
	if h.List {
		l := front.Table().Listing()
		for _, scheme := range []string{"http", "https", "dns"} {
			for _, a := range d.listening(scheme) {
				l.Listening = append(l.Listening, scheme+"://"+a.String())
			}
		}
		c.SetWriteDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
		json.NewEncoder(c).Encode(l)                        //nolint:errcheck // the lister sees a short answer
		return
	}
	if err := store.ValidateProfile(h.Profile); err != nil || h.Profile == d.spec.profile {
		slog.Warn("domains: registration refused", "profile", h.Profile, "err", err)
		return
	}
	d.mu.Lock()
	if d.members == nil { // closing
		d.mu.Unlock()
		return
	}
	d.members[c] = h.Profile
	d.mu.Unlock()
	sock := d.spec.localSock(h.Profile)
	front.Register(h.Profile, func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	})
	slog.Info("domains: serving another profile's names", "profile", h.Profile)
	yieldedTo := map[int]bool{} // given back when this member goes
	defer func() {
		for port := range yieldedTo {
			d.giveBack(port)
		}
	}()
	for {
		var u update
		if err := dec.Decode(&u); err != nil {
			break
		}
		switch {
		case u.Yield != 0:
			if d.yieldPort(u.Yield) != nil {
				yieldedTo[u.Yield] = true
			}
		case u.GiveBack != 0:
			if yieldedTo[u.GiveBack] {
				delete(yieldedTo, u.GiveBack)
				d.giveBack(u.GiveBack)
			}
		default:
			front.SetTable(h.Profile, domains.Build(h.Profile, u.Containers)) //nolint:errcheck // registered above
		}
	}
	d.mu.Lock()
	delete(d.members, c)
	last := true
	for _, p := range d.members {
		if p == h.Profile {
			last = false // the agent registered again before this one ended
		}
	}
	d.mu.Unlock()
	if last {
		front.Unregister(h.Profile)
	}
}

// join registers with the owner of the ports, if there is one.
func (d *domainsServer) join() bool {
	c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(d.ctx, "unix", filepath.Join(d.spec.home, registerSock))
	if err != nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil { // Close ran meanwhile
		c.Close()
		return false
	}
	enc := json.NewEncoder(c)
	c.SetWriteDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	if enc.Encode(hello{Profile: d.spec.profile}) != nil || enc.Encode(update{Containers: d.containers}) != nil {
		c.Close()
		return false
	}
	d.upstream = c
	slog.Info("domains: another agent owns the router's ports; registered with it")
	return true
}

// keepRole waits for this agent's role to end (the owner it registered
// with went away, or there was none) and elects again.
func (d *domainsServer) keepRole() {
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

// publish takes a new list of this profile's containers to every router
// that serves them.
func (d *domainsServer) publish(cs []domains.Container) {
	t := domains.Build(d.spec.profile, cs)
	for _, p := range t.Problems {
		slog.Info("domains: " + p)
	}
	d.local.SetTable(d.spec.profile, t) //nolint:errcheck // registered at start
	d.mu.Lock()
	defer d.mu.Unlock()
	d.containers = cs
	if d.front != nil {
		d.front.SetTable(d.spec.profile, t) //nolint:errcheck // registered in own
	}
	d.sendUpstream(update{Containers: cs})
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

// watchNames calls publish with the running containers when the runtime's
// event stream opens and after each event (several events while a list
// runs make one more list, not several). A list that fails is tried
// again after a pause, growing while it keeps failing: with no event to
// come, a container that went while the list ran would keep its name.
func watchNames(ctx context.Context, c nameSource, publish func([]domains.Container)) {
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
			slog.Debug("domains: container events ended; watching again", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(2*backoff, 10*time.Second)
		}
	}()
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

// listRetry is the first pause before a failed list is tried again.
var listRetry = 500 * time.Millisecond

// Close gives up the ports and the registration: registered agents see
// their connections end first, then the ports are free for one of them.
func (d *domainsServer) Close() {
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
	os.Remove(d.spec.localSock(d.spec.profile))
	d.wg.Wait()
}

// stepDomains serves http(s)://<name>.vmdock.localhost for this profile's
// containers. Nothing here fails the start: what cannot run is a note.
func (ha *hostAgent) stepDomains(context.Context) error {
	if !ha.cfg.Domains.Enabled {
		return nil
	}
	note := func(s string) { ha.events.Emit("domains", control.EventNote, "", s) }
	var names nameSource
	switch ha.cfg.Runtime {
	case config.RuntimeDocker:
	case config.RuntimeContainerd:
		// nerdctl in the guest: the containers' addresses are in their
		// network namespaces, which only the guest sees
		names = nerdctlapi.New(ha.guestExec)
	default:
		note("container domains: names for the " + ha.cfg.Runtime + " runtime are not built yet")
		return nil
	}
	d, notes, err := startDomains(domainsSpec{
		profile: ha.inst.Name,
		home:    filepath.Dir(ha.inst.Dir),
		cfg:     ha.cfg.Domains,
		binds:   []string{"127.0.0.1", "::1"},
		dial:    ha.link.Dial,
		names:   names,
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
	ha.domainsYield.Store(d)
	return nil
}

// guestExec runs a command in the guest for the names (nerdctlapi.Exec):
// no hold, so following events keeps no VM awake; a command waits out a
// reconnect before it starts, and ends with the session it ran on.
func (ha *hostAgent) guestExec(ctx context.Context, argv []string, stdout, stderr io.Writer) (int, error) {
	c, err := ha.link.live(ctx)
	if err != nil {
		return -1, err
	}
	return c.Exec(ctx, agent.ExecRequest{Argv: argv}, nil, stdout, stderr, nil)
}

func (ha *hostAgent) undoDomains(context.Context) error {
	ha.mu.Lock()
	d := ha.domains
	ha.domains = nil
	ha.mu.Unlock()
	ha.domainsYield.Store(nil)
	if d != nil {
		d.Close()
	}
	return nil
}
