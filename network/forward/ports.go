package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// PortEvent is one change in the guest's listening sockets (the same
// shape as agent.PortEvent, which this package does not import).
type PortEvent struct {
	Added bool
	Proto string // tcp, udp
	IP    string // as bound in the guest: 0.0.0.0, ::, 127.0.0.1, ...
	Port  int
}

// ForwardedPort is one guest port mirrored on the host, or the reason it
// could not be.
type ForwardedPort struct {
	Proto     string `json:"proto"`
	GuestPort int    `json:"guestPort"`
	// HostAddr is the port on the configured bind address (portBind).
	HostAddr string `json:"hostAddr"`
	// HostAddrs are the addresses that listen: HostAddr and, when portBind
	// is a loopback address, the other family's loopback. Empty when none
	// could (Error says why).
	HostAddrs []string `json:"hostAddrs,omitempty"`
	// Path is how new connections reach the guest: PathDirect or
	// PathTunnel (udp goes direct only through a DirectDatagramDialer).
	Path string `json:"path,omitempty"`
	// Error: no host address listens, so the port is not served.
	Error string `json:"error,omitempty"`
	// Warning: the port is served, but not on every address it should
	// be (another program has the port on one loopback family).
	Warning string `json:"warning,omitempty"`
}

// Paths a forwarded port's connections take to the guest.
const (
	// PathDirect: over the VM's own network (QEMU's hostfwd), the guest
	// agent not in the data path.
	PathDirect = "direct"
	// PathTunnel: a stream through the guest agent, which dials the port
	// inside the guest.
	PathTunnel = "tunnel"
)

// DirectPath reaches guest TCP ports over the VM's own network, without
// the guest agent in the data path. A driver's machine provides it when
// its network can (QEMU user networking's hostfwd), or the host agent
// makes an AddrPath for a guest the host routes to (vz's NAT network).
type DirectPath interface {
	// OpenPort makes guestPort, on the guest's network address, reachable
	// at the host address it returns.
	OpenPort(ctx context.Context, guestPort int) (string, error)
	// ClosePort undoes OpenPort.
	ClosePort(ctx context.Context, guestPort int) error
	// Handshakes is how many connections may be opening through the path
	// at once; more wait up to directTurnWait, then take the tunnel.
	Handshakes() int
}

// DirectDialer is a DirectPath whose addresses only it can dial: an
// in-process network stack, where the guest's address is no host route.
// The forwarder dials such a path's addresses through DialDirect.
type DirectDialer interface {
	DialDirect(ctx context.Context, addr string) (net.Conn, error)
}

// DirectDatagramDialer is a DirectDialer that carries UDP as well: an
// in-process stack sends a host peer's datagrams to the guest's address
// itself, where a host route would need a NAT address the OS may refuse.
// The conn it returns is connected: one Write, one datagram.
type DirectDatagramDialer interface {
	DialDirectUDP(ctx context.Context, addr string) (net.Conn, error)
}

// AddrPath is the DirectPath to a guest whose own address the host routes
// to: a port needs no rule, its address is the guest's address and port.
// It takes many handshakes at once (the guest's kernel accepts them).
type AddrPath struct {
	// Addr is the guest's address on the VM network; an error leaves the
	// port on the tunnel.
	Addr func(ctx context.Context) (netip.Addr, error)
}

func (p AddrPath) OpenPort(ctx context.Context, guestPort int) (string, error) {
	a, err := p.Addr(ctx)
	if err != nil {
		return "", fmt.Errorf("guest address: %w", err)
	}
	return netip.AddrPortFrom(a, uint16(guestPort)).String(), nil
}

func (AddrPath) ClosePort(context.Context, int) error { return nil }

// Handshakes: a guest's listen backlog, not a one-slot queue in between.
func (AddrPath) Handshakes() int { return 64 }

// DefaultUDPIdleTimeout ends a UDP peer's guest stream after this long
// without a datagram in either direction.
const DefaultUDPIdleTimeout = 60 * time.Second

// DefaultMaxPorts bounds the forwarded ports: the list comes from the
// guest, and a broken or hostile one must not get a host listener (and its
// memory) per port it claims. Real workloads stay far below it.
const DefaultMaxPorts = 1024

// maxGuestIPs bounds the guest addresses recorded for one port, for the
// same reason: a guest that has a port on more addresses than this is
// forwarded anyway, the extra addresses just are not remembered.
const maxGuestIPs = 16

// PortForwarderConfig configures NewPortForwarder.
type PortForwarderConfig struct {
	Dial           DialFunc      // opens streams in the guest
	Hold           Hold          // each connection and UDP peer is a use of the VM; nil: none
	Direct         DirectPath    // nil: every port tunnels through Dial
	BindAddr       string        // host IP listeners bind to; default 127.0.0.1
	Rules          *Rules        // nil forwards every port to the same number
	UDPIdleTimeout time.Duration // default DefaultUDPIdleTimeout
	MaxPorts       int           // default DefaultMaxPorts
	Log            *slog.Logger  // default slog.Default()
	// Yield is asked for a TCP host port that is in use before its
	// forward gives up: vmdock's own container-domains router holds ports
	// 80 and 443 by default and gives one up to a port the user published
	// (`docker run -p 80:80` wins, as on Docker Desktop). It returns what
	// gives the port back once the forward ends, or nil when the port is
	// not the router's. nil: no port is ever yielded.
	Yield func(port int) (giveBack func())
}

// yieldRetry is how long a forward waits for a yielded port to come free:
// a router in another host agent gives it up a moment after it is asked.
const yieldRetry = 2 * time.Second

// PortForwarder mirrors the guest's listening ports on the host, fed by
// Apply with the guest's port events. Failures to listen are recorded in
// Ports and logged, never returned: one busy host port must not stop the
// others.
type PortForwarder struct {
	opts   PortForwarderConfig
	ctx    context.Context
	cancel context.CancelFunc
	conns  *connSet
	wg     sync.WaitGroup

	mu     sync.Mutex
	fwds   map[fwdKey]*forward
	closed bool
	// gen counts port listings (BeginSync); each guest IP remembers the
	// one that last announced it, so EndSync can drop what a new listing
	// no longer has.
	gen uint64
	// refusing is set while ports are refused for MaxPorts, so the refusal
	// is logged once, not once per port; refused counts them.
	refusing bool
	refused  int

	// directTurn lets Direct.Handshakes() direct-path handshakes run at
	// a time; see dialDirect.
	directTurn chan struct{}
	// directRefused: the host refused to reach the guest's address at
	// all (see abandonDirect); every port tunnels from then on.
	directRefused bool

	// hosts are the host IPs each port listens on: BindAddr, then the
	// other loopback family's (see listenHosts).
	hosts []string

	// Swapped by tests to simulate bind failures and watch direct dials.
	listenTCP  func(addr string) (net.Listener, error)
	listenUDP  func(addr string) (net.PacketConn, error)
	directDial func(ctx context.Context, addr string) (net.Conn, error)
	// directUDP dials a UDP direct path; nil when Direct carries no UDP.
	directUDP func(ctx context.Context, addr string) (net.Conn, error)
}

// directHandshakes is the direct path's own limit, at least one.
func directHandshakes(p DirectPath) int {
	if p == nil {
		return 1
	}
	return max(1, p.Handshakes())
}

// A direct dial waits at most directTurnWait for its turn and
// directConnectTimeout for the handshake, then the connection takes the
// tunnel. A loopback handshake QEMU takes is sub-millisecond; one that is
// not answered was dropped (QEMU has not yet accepted the ones before) and
// the kernel would retry only after a second. Tunnelling instead kept a
// 50-connection burst's p50 at the tunnel's (0.5 s), where waiting for the
// turn put it at 2.8 s.
const (
	directTurnWait       = 100 * time.Millisecond
	directConnectTimeout = 500 * time.Millisecond
)

type fwdKey struct {
	proto string
	port  int // guest port
}

// forward is one (proto, guest port). Guest sockets on 0.0.0.0 and :: for
// the same port share it; it closes when the last one goes away.
type forward struct {
	key      fwdKey
	hostAddr string            // on BindAddr
	addrs    []string          // to listen on: hostAddr first
	guestIPs map[string]uint64 // -> listing generation that last saw it
	// err: no address of addrs listens; missed: the ones that do not
	// while another does.
	err       error
	missed    []error
	listeners []hostListener
	// failed: the addresses of addrs not listening, and why.
	failed map[string]error
	// direct is the host address of the port's direct path once opened;
	// directing says an open is under way or done.
	direct    string
	directing bool
	// giveBack returns the port to whoever yielded it (Yield).
	giveBack func()
}

// hostListener is one host address of a forward: a TCP listener or a UDP
// relay.
type hostListener struct {
	addr string
	ln   net.Listener // tcp
	udp  *udpRelay    // udp
	// served is closed when the listener's serving loop ends: by stop,
	// or by the socket failing under it (see Heal).
	served chan struct{}
}

// hostHasIPv6Loopback probes, once per process, whether this host can
// listen on [::1] (a host or container may have IPv6 off).
var hostHasIPv6Loopback = sync.OnceValue(func() bool {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
})

// listenHosts are the host IPs a forwarded port listens on for bind.
// Clients that resolve localhost to ::1 first (or only) must reach a
// port bound to 127.0.0.1, so the default loopback bind also takes [::1]
// when the host has IPv6 loopback, and a ::1 bind also takes 127.0.0.1:
// both are this machine's loopback, so nothing more is exposed. Other
// binds, other 127/8 addresses included (someone may run two instances
// on two of them), stay one address.
func listenHosts(bind string, ipv6Loopback func() bool) []string {
	a, err := netip.ParseAddr(bind)
	switch {
	case err != nil:
		return []string{bind}
	case a == netip.AddrFrom4([4]byte{127, 0, 0, 1}):
		if ipv6Loopback() {
			return []string{bind, "::1"}
		}
	case a == netip.IPv6Loopback():
		return []string{bind, "127.0.0.1"}
	}
	return []string{bind}
}

// NewPortForwarder returns a forwarder with no ports open yet. A bad
// BindAddr (config validation rejects it earlier) shows up as an error
// on each port in Ports, like any other listen failure.
func NewPortForwarder(opts PortForwarderConfig) *PortForwarder {
	if opts.Dial == nil {
		opts.Dial = func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("port forwarder has no dial function")
		}
	}
	if opts.BindAddr == "" {
		opts.BindAddr = "127.0.0.1"
	}
	if opts.UDPIdleTimeout <= 0 {
		opts.UDPIdleTimeout = DefaultUDPIdleTimeout
	}
	if opts.MaxPorts <= 0 {
		opts.MaxPorts = DefaultMaxPorts
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &PortForwarder{
		opts: opts, ctx: ctx, cancel: cancel, conns: newConnSet(),
		fwds:       map[fwdKey]*forward{},
		directTurn: make(chan struct{}, directHandshakes(opts.Direct)),
		hosts:      listenHosts(opts.BindAddr, hostHasIPv6Loopback),
		listenTCP:  func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) },
		listenUDP:  func(addr string) (net.PacketConn, error) { return net.ListenPacket("udp", addr) },
		directDial: directDialFor(opts.Direct),
		directUDP:  directUDPFor(opts.Direct),
	}
}

// directUDPFor is how the forwarder sends a UDP peer's datagrams over p,
// or nil when p carries only TCP.
func directUDPFor(p DirectPath) func(ctx context.Context, addr string) (net.Conn, error) {
	if d, ok := p.(DirectDatagramDialer); ok {
		return d.DialDirectUDP
	}
	return nil
}

// directDialFor is how the forwarder dials the addresses p returns.
func directDialFor(p DirectPath) func(ctx context.Context, addr string) (net.Conn, error) {
	if d, ok := p.(DirectDialer); ok {
		return d.DialDirect
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// Apply opens or closes the host side of one guest listener. Events are
// idempotent: a repeated "added" for the same guest IP changes nothing,
// so a re-sent full listing after an agent reconnect is harmless.
func (f *PortForwarder) Apply(ev PortEvent) {
	log := f.opts.Log.With("proto", ev.Proto, "guestIP", ev.IP, "guestPort", ev.Port)
	if ev.Proto != "tcp" && ev.Proto != "udp" {
		log.Warn("ignoring port event with unknown protocol")
		return
	}
	hostPort, ok := f.opts.Rules.Map(ev.Proto, ev.Port)
	if !ok {
		log.Debug("guest port not forwarded by the rules")
		return
	}
	key := fwdKey{ev.Proto, ev.Port}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	fw := f.fwds[key]
	if !ev.Added {
		if fw == nil {
			return
		}
		delete(fw.guestIPs, ev.IP)
		if len(fw.guestIPs) == 0 {
			f.remove(fw, log)
		}
		return
	}
	if fw != nil {
		if _, ok := fw.guestIPs[ev.IP]; ok || len(fw.guestIPs) < maxGuestIPs {
			fw.guestIPs[ev.IP] = f.gen
		}
		f.maybeDirect(fw)
		return
	}
	if len(f.fwds) >= f.opts.MaxPorts {
		f.refuse(log)
		return
	}
	f.refusing = false
	fw = &forward{
		key:      key,
		guestIPs: map[string]uint64{ev.IP: f.gen},
	}
	for _, h := range f.hosts {
		fw.addrs = append(fw.addrs, net.JoinHostPort(h, strconv.Itoa(hostPort)))
	}
	fw.hostAddr = fw.addrs[0]
	f.fwds[key] = fw
	if err := f.start(fw); err != nil {
		log.Warn("cannot forward guest port", "host", fw.hostAddr, "err", err)
		return
	}
	for _, err := range fw.missed {
		log.Warn("guest port forwarded on fewer host addresses", "err", err)
	}
	log.Info("forwarding", "host", strings.Join(fw.listening(), ","))
	f.maybeDirect(fw)
}

// reachableDirectly reports whether a guest listener bound on ips can be
// reached from the VM's network: one bound only to the guest's loopback
// cannot (QEMU's hostfwd connects to the guest's network address). UDP
// goes direct only when the path carries datagrams itself (udpDirect):
// through QEMU's hostfwd it measured no faster than the tunnel.
func reachableDirectly(proto string, ips []string, udpDirect bool) bool {
	if proto != "tcp" && (proto != "udp" || !udpDirect) {
		return false
	}
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err == nil && !a.Unmap().IsLoopback() {
			return true
		}
	}
	return false
}

// maybeDirect opens fw's direct path in the background when the port can
// use one; called with f.mu held. Connections that arrive meanwhile tunnel.
func (f *PortForwarder) maybeDirect(fw *forward) {
	if f.opts.Direct == nil || f.directRefused || fw.directing || fw.err != nil || !reachableDirectly(fw.key.proto, ipsOf(fw), f.directUDP != nil) {
		return
	}
	fw.directing = true
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
		defer cancel()
		addr, err := f.opts.Direct.OpenPort(ctx, fw.key.port)
		if err != nil {
			f.opts.Log.Info("no direct path to the guest port; it tunnels", "guestPort", fw.key.port, "err", err)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.closed || f.directRefused || f.fwds[fw.key] != fw { // gone, or no direct path, meanwhile
			go f.opts.Direct.ClosePort(context.Background(), fw.key.port)
			return
		}
		fw.direct = addr
	}()
}

func ipsOf(fw *forward) []string {
	ips := make([]string, 0, len(fw.guestIPs))
	for ip := range fw.guestIPs {
		ips = append(ips, ip)
	}
	return ips
}

// refuse drops a port beyond MaxPorts; called with f.mu held. Only the
// first refusal of a streak is logged: a guest announcing thousands of
// ports must not flood the log either.
func (f *PortForwarder) refuse(log *slog.Logger) {
	f.refused++
	if f.refusing {
		log.Debug("guest port not forwarded: too many ports")
		return
	}
	f.refusing = true
	log.Warn("guest port not forwarded: the guest has more ports than the forwarding limit; further ports are refused until some close",
		"limit", f.opts.MaxPorts, "refused so far", f.refused)
}

// Refused is how many port announcements MaxPorts turned away.
func (f *PortForwarder) Refused() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

// remove stops fw and forgets it; called with f.mu held.
func (f *PortForwarder) remove(fw *forward, log *slog.Logger) {
	delete(f.fwds, fw.key)
	fw.stop()
	if fw.direct != "" {
		port := fw.key.port
		go f.opts.Direct.ClosePort(context.Background(), port)
		fw.direct = ""
	}
	log.Info("stopped forwarding", "host", fw.hostAddr)
}

// BeginSync starts a new full listing of the guest's ports (a new port
// watch after the agent reconnected): the Added events that follow
// confirm ports, and EndSync closes every port the listing did not name.
func (f *PortForwarder) BeginSync() {
	f.mu.Lock()
	f.gen++
	f.mu.Unlock()
}

// EndSync closes the ports, and forgets the guest addresses, that no
// Added event confirmed since BeginSync: they went away while the agent
// was not watching.
func (f *PortForwarder) EndSync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fw := range f.fwds {
		for ip, gen := range fw.guestIPs {
			if gen != f.gen {
				delete(fw.guestIPs, ip)
			}
		}
		if len(fw.guestIPs) == 0 {
			f.remove(fw, f.opts.Log.With("proto", fw.key.proto, "guestPort", fw.key.port))
		}
	}
}

// start opens the host listeners, one per address; called with f.mu
// held. An address that cannot listen while another can is recorded in
// fw.missed: a port taken on one loopback family still serves the other.
// The error is for none listening.
func (f *PortForwarder) start(fw *forward) error {
	fw.failed = map[string]error{}
	for _, addr := range fw.addrs {
		f.bind(fw, addr)
	}
	fw.noteFailures()
	return fw.err
}

// bind opens fw's listener on addr, or records why it cannot in
// fw.failed; called with f.mu held.
func (f *PortForwarder) bind(fw *forward, addr string) bool {
	l, err := f.listen(fw, addr)
	if err != nil && errors.Is(err, syscall.EADDRINUSE) && fw.key.proto == "tcp" {
		l, err = f.listenYielded(fw, addr, err)
	}
	if err != nil {
		fw.failed[addr] = err
		return false
	}
	delete(fw.failed, addr)
	fw.listeners = append(fw.listeners, l)
	return true
}

// noteFailures sets fw.err (no address listens) or fw.missed (some do
// not) from fw.failed, and puts the listeners back in fw.addrs' order.
func (fw *forward) noteFailures() {
	var errs []error
	for _, addr := range fw.addrs {
		if err, ok := fw.failed[addr]; ok {
			errs = append(errs, listenError(fw.key.proto, addr, err))
		}
	}
	slices.SortStableFunc(fw.listeners, func(a, b hostListener) int {
		return slices.Index(fw.addrs, a.addr) - slices.Index(fw.addrs, b.addr)
	})
	fw.err, fw.missed = nil, nil
	if len(fw.listeners) == 0 {
		fw.err = joinErrors(errs)
	} else if len(errs) > 0 {
		fw.missed = errs
	}
}

// listenYielded asks Yield for addr's port, which is in use, and listens
// once it is free; busy is the error to keep when it is not yielded.
func (f *PortForwarder) listenYielded(fw *forward, addr string, busy error) (hostListener, error) {
	if fw.giveBack == nil {
		if f.opts.Yield == nil {
			return hostListener{}, busy
		}
		_, portText, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(portText)
		fw.giveBack = f.opts.Yield(port)
		if fw.giveBack == nil {
			return hostListener{}, busy
		}
		f.opts.Log.Info("the container-domains router gave its port to a published port", "host", addr)
	}
	deadline := time.Now().Add(yieldRetry)
	for {
		l, err := f.listen(fw, addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *PortForwarder) listen(fw *forward, addr string) (hostListener, error) {
	l := hostListener{addr: addr, served: make(chan struct{})}
	switch fw.key.proto {
	case "tcp":
		ln, err := f.listenTCP(addr)
		if err != nil {
			return l, err
		}
		l.ln = ln
		f.wg.Add(1)
		go f.acceptTCP(fw, ln, addr, l.served)
	case "udp":
		pc, err := f.listenUDP(addr)
		if err != nil {
			return l, err
		}
		l.udp = newUDPRelay(f, fw, pc, addr, l.served)
	}
	return l, nil
}

// joinErrors is errs as one error on one line (errors.Join puts newlines
// between, which would break status's one line per port).
func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return lineErrors(errs)
}

type lineErrors []error

func (e lineErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e lineErrors) Unwrap() []error { return e }

func listenError(proto, addr string, err error) error {
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("listen on %s/%s: port is privileged (below 1024) and vmdock is not root; map it to a higher host port with a port rule: %w",
			addr, proto, err)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s/%s: port already in use on the host: %w", addr, proto, err)
	}
	return fmt.Errorf("listen on %s/%s: %w", addr, proto, err)
}

// listening are the host addresses that serve fw.
func (fw *forward) listening() []string {
	out := make([]string, len(fw.listeners))
	for i, l := range fw.listeners {
		out[i] = l.addr
	}
	return out
}

// stop closes the host listeners and gives a yielded port back. Tunnels
// already open keep running: the guest server may still be serving them
// after it stopped listening.
func (fw *forward) stop() {
	for _, l := range fw.listeners {
		l.close()
	}
	if fw.giveBack != nil {
		go fw.giveBack()
		fw.giveBack = nil
	}
}

// guestAddr is where, inside the guest, a new connection is dialled.
func (f *PortForwarder) guestAddr(fw *forward) string {
	f.mu.Lock()
	ips := make([]string, 0, len(fw.guestIPs))
	for ip := range fw.guestIPs {
		ips = append(ips, ip)
	}
	f.mu.Unlock()
	return net.JoinHostPort(guestHost(ips), strconv.Itoa(fw.key.port))
}

// guestHost picks the guest address to dial for the IPs a port is bound
// on: IPv4 loopback when any IPv4 wildcard or loopback is bound, IPv6
// loopback for v6-only wildcard/loopback listeners, else the bound IP.
func guestHost(ips []string) string {
	slices.Sort(ips)
	var v6, other string
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		a = a.Unmap()
		switch {
		case a.Is4() && (a.IsUnspecified() || a.IsLoopback()):
			return "127.0.0.1"
		case a.Is6() && (a.IsUnspecified() || a.IsLoopback()):
			v6 = "::1"
		case other == "":
			other = a.String()
		}
	}
	if v6 != "" {
		return v6
	}
	if other != "" {
		return other
	}
	return "127.0.0.1"
}

func (f *PortForwarder) acceptTCP(fw *forward, ln net.Listener, addr string, served chan struct{}) {
	defer f.wg.Done()
	defer close(served)
	log := f.opts.Log.With("host", addr)
	err := serveAccept(ln, log, func(c net.Conn) bool {
		if !f.conns.add(c) {
			c.Close()
			return false
		}
		f.wg.Add(1)
		go f.tunnelTCP(fw, c)
		return true
	})
	if err != nil && !errors.Is(err, net.ErrClosed) {
		log.Warn("port forwarder stopped accepting", "err", err)
	}
}

func (f *PortForwarder) tunnelTCP(fw *forward, c net.Conn) {
	defer f.wg.Done()
	defer f.conns.remove(c)
	addr := f.guestAddr(fw)
	f.mu.Lock()
	direct := fw.direct
	f.mu.Unlock()
	err := dialAndPipe(f.ctx, c, f.conns, 30*time.Second, f.opts.Hold, func(ctx context.Context) (net.Conn, error) {
		if direct != "" {
			dc, err := f.dialDirect(ctx, direct)
			if err == nil {
				return dc, nil
			}
			if hostRefusesGuestAddr(err) {
				f.abandonDirect(direct, err)
				return f.opts.Dial(ctx, "tcp", addr)
			}
			// A burst that outwaits its turn is expected (one handshake
			// at a time); only other failures are worth a warning.
			level := slog.LevelWarn
			if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
				level = slog.LevelDebug
			}
			f.opts.Log.Log(ctx, level, "direct path to the guest port failed; tunnelling", "guest", addr, "direct", direct, "err", err)
		}
		return f.opts.Dial(ctx, "tcp", addr)
	})
	if err != nil {
		f.opts.Log.Warn("dial guest port", "guest", addr, "err", err)
	}
}

// hostRefusesGuestAddr tells a direct dial the host itself refused, for
// every port alike: macOS 15's Local Network privacy answers EHOSTUNREACH
// or EPERM to a process the user has not allowed to reach the local
// network, which vz's NAT address is part of.
func hostRefusesGuestAddr(err error) bool {
	return errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.EPERM)
}

// abandonDirect moves every port to the tunnel for good once the host
// refuses the guest's address: each connection would fail the same way,
// and warning (and paying a failed dial) per connection helps nobody.
func (f *PortForwarder) abandonDirect(direct string, err error) {
	f.mu.Lock()
	first := !f.directRefused
	f.directRefused = true
	var opened []int
	for _, fw := range f.fwds {
		if fw.direct != "" {
			opened = append(opened, fw.key.port)
			fw.direct = ""
		}
	}
	f.mu.Unlock()
	for _, port := range opened {
		go f.opts.Direct.ClosePort(context.Background(), port)
	}
	if first {
		f.opts.Log.Warn("the host refuses direct connections to the guest's address (on macOS 15 and later: allow vmdock under System Settings > Privacy & Security > Local Network); published ports use the agent tunnel from now on",
			"direct", direct, "err", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dialDirect connects to a direct path's host address, with at most the
// path's Handshakes in flight (one for QEMU's hostfwd; see vm/qemu); a dial
// that would wait longer than directTurnWait takes the tunnel instead.
func (f *PortForwarder) dialDirect(ctx context.Context, addr string) (net.Conn, error) {
	turn := time.NewTimer(directTurnWait)
	defer turn.Stop()
	select {
	case f.directTurn <- struct{}{}:
	case <-turn.C:
		return nil, fmt.Errorf("wait for a direct-path turn: %w", context.DeadlineExceeded)
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for a direct-path turn: %w", ctx.Err())
	}
	defer func() { <-f.directTurn }()
	ctx, cancel := context.WithTimeout(ctx, directConnectTimeout)
	defer cancel()
	return f.directDial(ctx, addr)
}

// Ports lists every forwarded guest port, sorted by protocol and port.
func (f *PortForwarder) Ports() []ForwardedPort {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ForwardedPort, 0, len(f.fwds))
	for _, fw := range f.fwds {
		p := ForwardedPort{Proto: fw.key.proto, GuestPort: fw.key.port, HostAddr: fw.hostAddr, Path: PathTunnel}
		if fw.direct != "" {
			p.Path = PathDirect
		}
		if fw.err != nil {
			p.Error = fw.err.Error()
		} else {
			p.HostAddrs = fw.listening()
		}
		if len(fw.missed) > 0 {
			p.Warning = joinErrors(fw.missed).Error()
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b ForwardedPort) int {
		if a.Proto != b.Proto {
			if a.Proto < b.Proto {
				return -1
			}
			return 1
		}
		return a.GuestPort - b.GuestPort
	})
	return out
}

// Close closes every listener and tunnel and waits for their goroutines.
func (f *PortForwarder) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	fwds := f.fwds
	f.fwds = map[fwdKey]*forward{}
	f.mu.Unlock()

	f.cancel()
	for _, fw := range fwds {
		fw.stop()
	}
	f.conns.closeAll()
	f.wg.Wait()
	return nil
}
