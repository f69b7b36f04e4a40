package dnsforward

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/agent/lenprefix"
)

// Containers cannot read the guest's /etc/hosts, so host.docker.internal
// only resolves for them through DNS. The agent answers those names on the
// host access IP (on lo, so reachable from every bridge) and relays the
// rest to the guest's own resolvers; dockerd's "dns" points containers here.

const (
	// dnsMaxInFlight bounds the goroutines answering queries; beyond it
	// UDP queries are dropped (clients retry) and TCP connections closed.
	dnsMaxInFlight = 64
	// dnsUpstreamTimeout is one upstream's share; dnsQueryBudget is the
	// whole query's, below the 5s resolvers in containers wait for us.
	dnsUpstreamTimeout = 2 * time.Second
	dnsQueryBudget     = 4 * time.Second
	dnsTCPIdle         = 10 * time.Second
	dnsLocalTTL        = 60
	dnsMaxUpstreams    = 3
)

// dnsLocalNames are answered with the host access IP.
var dnsLocalNames = []string{"host.docker.internal.", "gateway.docker.internal."}

// dnsLocalZone and every name under it are answered with the host access
// IP too: containers reach each other by container-domain name through
// the host's router, the same way a browser on the host does.
const dnsLocalZone = "vmdock.localhost."

// dnsServer answers the local names and forwards every other query.
type dnsServer struct {
	log   *slog.Logger
	local [4]byte
	// self is the listen address, never used as an upstream (a loop).
	self string

	sem chan struct{}

	mu        sync.Mutex
	upstreams []string // host:port
}

func newDNSServer(log *slog.Logger, local net.IP, self string) (*dnsServer, error) {
	ip4 := local.To4()
	if ip4 == nil {
		return nil, fmt.Errorf("DNS answer address %q is not IPv4", local)
	}
	d := &dnsServer{log: log, self: self, sem: make(chan struct{}, dnsMaxInFlight)}
	copy(d.local[:], ip4)
	return d, nil
}

// setUpstreams takes IPs ("10.0.2.3") or IP:port pairs; the listen address
// itself and duplicates are skipped. It says whether the list changed.
func (d *dnsServer) setUpstreams(addrs []string) (bool, error) {
	var out []string
	seen := map[string]bool{}
	for _, a := range addrs {
		hp := a
		if net.ParseIP(a) != nil {
			hp = net.JoinHostPort(a, "53")
		}
		host, port, err := net.SplitHostPort(hp)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 || net.ParseIP(host) == nil {
			return false, fmt.Errorf("DNS upstream %q: want an IP address or IP:port", a)
		}
		if hp == d.self || seen[hp] {
			continue
		}
		seen[hp] = true
		out = append(out, hp)
	}
	if len(out) > dnsMaxUpstreams {
		out = out[:dnsMaxUpstreams]
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if slices.Equal(out, d.upstreams) {
		return false, nil
	}
	d.upstreams = out
	return true, nil
}

func (d *dnsServer) currentUpstreams() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.upstreams)
}

// serve answers on pc and l until ctx ends, then closes both and waits for
// the queries in flight.
func (d *dnsServer) serve(ctx context.Context, pc net.PacketConn, l net.Listener) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer cancel()
		d.serveUDP(ctx, pc, &wg)
	}()
	go func() {
		defer wg.Done()
		defer cancel()
		d.serveTCP(ctx, l, &wg)
	}()
	<-ctx.Done()
	pc.Close()
	l.Close()
	wg.Wait()
}

func (d *dnsServer) acquire() bool {
	select {
	case d.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

func (d *dnsServer) release() { <-d.sem }

func (d *dnsServer) serveUDP(ctx context.Context, pc net.PacketConn, wg *sync.WaitGroup) {
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("dns: udp read", "err", err)
			}
			return
		}
		if !d.acquire() {
			d.log.Debug("dns: busy, dropping query", "from", from)
			continue
		}
		msg := append([]byte(nil), buf[:n]...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer d.release()
			if resp := d.answer(ctx, msg, false); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}()
	}
}

func (d *dnsServer) serveTCP(ctx context.Context, l net.Listener, wg *sync.WaitGroup) {
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("dns: tcp accept", "err", err)
			}
			return
		}
		if !d.acquire() {
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer d.release()
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			d.serveTCPConn(ctx, c)
		}()
	}
}

// serveTCPConn answers length-prefixed queries (package lenprefix frames
// them as RFC 1035 asks) one after the other until the client goes quiet
// or sends something that is not DNS.
func (d *dnsServer) serveTCPConn(ctx context.Context, c net.Conn) {
	r := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(dnsTCPIdle))
		msg, err := lenprefix.ReadFrame(r)
		if err != nil {
			return
		}
		resp := d.answer(ctx, msg, true)
		if resp == nil {
			return
		}
		_ = c.SetWriteDeadline(time.Now().Add(dnsTCPIdle))
		if err := lenprefix.Write(c, resp); err != nil {
			return
		}
	}
}

// answer returns the reply to msg, or nil when msg deserves none (not a
// query, or too broken to echo its ID).
func (d *dnsServer) answer(ctx context.Context, msg []byte, tcp bool) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return d.reply(h, nil, dnsmessage.RCodeFormatError)
	}
	if h.OpCode == 0 && q.Class == dnsmessage.ClassINET && d.isLocal(q.Name) {
		return d.localAnswer(h, q)
	}
	if resp, err := d.forward(ctx, msg, h.ID, tcp); err == nil {
		return resp
	} else if ctx.Err() == nil {
		d.log.Debug("dns: forward failed", "name", q.Name.String(), "err", err)
	}
	return d.reply(h, &q, dnsmessage.RCodeServerFailure)
}

func (d *dnsServer) isLocal(n dnsmessage.Name) bool {
	name := n.String()
	for _, l := range dnsLocalNames {
		if strings.EqualFold(name, l) {
			return true
		}
	}
	lower := strings.ToLower(name)
	return lower == dnsLocalZone || strings.HasSuffix(lower, "."+dnsLocalZone)
}

// localAnswer gives A the host access IP; every other type gets an empty
// NOERROR, so resolvers asking AAAA first do not give up on the name.
func (d *dnsServer) localAnswer(h dnsmessage.Header, q dnsmessage.Question) []byte {
	b, ok := d.builder(h, &q, dnsmessage.RCodeSuccess)
	if !ok {
		return nil
	}
	if q.Type == dnsmessage.TypeA || q.Type == dnsmessage.TypeALL {
		if err := b.StartAnswers(); err != nil {
			return nil
		}
		rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsLocalTTL}
		if err := b.AResource(rh, dnsmessage.AResource{A: d.local}); err != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// reply is an answerless response with rcode, echoing the question.
func (d *dnsServer) reply(h dnsmessage.Header, q *dnsmessage.Question, rcode dnsmessage.RCode) []byte {
	b, ok := d.builder(h, q, rcode)
	if !ok {
		return nil
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

func (d *dnsServer) builder(h dnsmessage.Header, q *dnsmessage.Question, rcode dnsmessage.RCode) (*dnsmessage.Builder, bool) {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), dnsmessage.Header{
		ID:                 h.ID,
		Response:           true,
		OpCode:             h.OpCode,
		Authoritative:      rcode == dnsmessage.RCodeSuccess,
		RecursionDesired:   h.RecursionDesired,
		RecursionAvailable: true,
		RCode:              rcode,
	})
	b.EnableCompression()
	if q == nil {
		return &b, true
	}
	if err := b.StartQuestions(); err != nil {
		return nil, false
	}
	if err := b.Question(*q); err != nil {
		return nil, false
	}
	return &b, true
}

// forward tries the upstreams in order within the query budget, over the
// transport the client used (a truncated UDP answer makes it retry on TCP).
func (d *dnsServer) forward(ctx context.Context, msg []byte, id uint16, tcp bool) ([]byte, error) {
	ups := d.currentUpstreams()
	if len(ups) == 0 {
		return nil, errors.New("no upstream DNS servers")
	}
	ctx, cancel := context.WithTimeout(ctx, dnsQueryBudget)
	defer cancel()
	var errs []error
	for _, up := range ups {
		resp, err := exchange(ctx, up, msg, id, tcp)
		if err == nil {
			return resp, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func exchange(ctx context.Context, up string, msg []byte, id uint16, tcp bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, dnsUpstreamTimeout)
	defer cancel()
	network := "udp"
	if tcp {
		network = "tcp"
	}
	var dl net.Dialer
	c, err := dl.DialContext(ctx, network, up)
	if err != nil {
		return nil, fmt.Errorf("dns upstream %s: %w", up, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if tcp {
		if err := lenprefix.Write(c, msg); err != nil {
			return nil, fmt.Errorf("dns upstream %s: %w", up, err)
		}
		resp, err := lenprefix.ReadFrame(c)
		if err != nil {
			return nil, fmt.Errorf("dns upstream %s: %w", up, err)
		}
		if !isReplyTo(resp, id) {
			return nil, fmt.Errorf("dns upstream %s: answer does not match the query", up)
		}
		return resp, nil
	}
	if _, err := c.Write(msg); err != nil {
		return nil, fmt.Errorf("dns upstream %s: %w", up, err)
	}
	buf := make([]byte, 65535)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, fmt.Errorf("dns upstream %s: %w", up, err)
		}
		// A stray datagram (a late answer to someone else) is skipped.
		if isReplyTo(buf[:n], id) {
			return append([]byte(nil), buf[:n]...), nil
		}
	}
}

func isReplyTo(msg []byte, id uint16) bool {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	return err == nil && h.Response && h.ID == id
}

// Upstreams picks the resolvers the guest itself uses: the configured
// ones, else DHCP's, else systemd-resolved's upstream list, else
// resolv.conf's. Resolved's stub (127.0.0.53) is never one: with upstreams
// of its own resolved lists them in its upstream file, and without it
// only fails every query, while the list stays non-empty and looks fine.
func (s *Forwarder) Upstreams(given []string) []string {
	if len(given) > 0 {
		return given
	}
	if l := s.LeaseDNS(); len(l) > 0 {
		return l
	}
	for _, f := range []string{"/run/systemd/resolve/resolv.conf", "/etc/resolv.conf"} {
		l := slices.DeleteFunc(readNameservers(s.Path(f)), isResolvedStub)
		if len(l) > 0 {
			return l
		}
	}
	return nil
}

// isResolvedStub says whether ip is one of systemd-resolved's local
// listeners.
func isResolvedStub(ip string) bool {
	return ip == "127.0.0.53" || ip == "127.0.0.54"
}

func readNameservers(p string) []string {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		// A scoped IPv6 address (fe80::1%eth0) does not parse and is skipped.
		if len(f) >= 2 && f[0] == "nameserver" && net.ParseIP(f[1]) != nil {
			out = append(out, f[1])
		}
	}
	return out
}

// Forwarder runs the guest's DNS server for containers and knows the
// guest's own resolvers. Its lock is its own, so DNS restarts never wait
// on sessions.
type Forwarder struct {
	guestos.Sys

	mu      sync.Mutex
	running *dnsRunner
}

// dnsRunner is one running DNS server.
type dnsRunner struct {
	listen string
	ip     string
	// given are the configured resolvers; none: the guest's own, looked
	// up again every dnsRecheck.
	given []string
	srv   *dnsServer
	stop  context.CancelFunc
	done  chan struct{}
}

// The guest's resolvers are looked for again every dnsRecheck, and every
// dnsRecheckNone while there are none: the boot does not wait for the
// network, so the server usually starts before the DHCP lease names them,
// and a later lease (a resumed guest, another network) may name others.
// Reading two small files costs nothing next to a stale list, which fails
// every lookup of every container.
const (
	dnsRecheck     = 5 * time.Second
	dnsRecheckNone = time.Second
)

// Start serves DNS on ip:53 for the agent's lifetime; a second setup
// only refreshes the upstreams.
func (s *Forwarder) Start(ip string, given []string) error {
	return s.StartOn(net.JoinHostPort(ip, "53"), ip, given)
}

// listenDNS listens for UDP and TCP on the same address. With port 0
// (tests) TCP must take the port UDP got, which another program may hold
// for TCP: another port is tried then.
func listenDNS(addr string) (net.PacketConn, net.Listener, error) {
	for try := 0; ; try++ {
		pc, err := net.ListenPacket("udp4", addr)
		if err != nil {
			return nil, nil, err
		}
		l, err := net.Listen("tcp4", pc.LocalAddr().String())
		if err == nil {
			return pc, l, nil
		}
		pc.Close()
		if _, port, _ := net.SplitHostPort(addr); port != "0" || !errors.Is(err, syscall.EADDRINUSE) || try == 9 {
			return nil, nil, err
		}
	}
}

// StartOn listens on listen (UDP and TCP on the same port) and answers
// the local names with ip.
func (s *Forwarder) StartOn(listen, ip string, given []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.running; r != nil {
		if r.listen == listen && r.ip == ip {
			r.given = given
			_, err := s.refreshUpstreams(r)
			return err
		}
		r.stop()
		<-r.done
		s.running = nil
	}
	pc, l, err := listenDNS(listen)
	if err != nil {
		return fmt.Errorf("dns server: %w", err)
	}
	srv, err := newDNSServer(s.Logger(), net.ParseIP(ip), pc.LocalAddr().String())
	if err != nil {
		pc.Close()
		l.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &dnsRunner{listen: listen, ip: ip, given: given, srv: srv, stop: cancel, done: make(chan struct{})}
	if _, err := s.refreshUpstreams(r); err != nil {
		cancel()
		pc.Close()
		l.Close()
		return err
	}
	s.running = r
	s.Logger().Info("dns server listening", "addr", srv.self, "upstreams", srv.currentUpstreams())
	go func() {
		defer close(r.done)
		go s.followUpstreams(ctx, r)
		srv.serve(ctx, pc, l)
	}()
	return nil
}

// refreshUpstreams sets r's upstreams to the guest's current resolvers
// and says whether they changed. Called with dnsMu held.
func (s *Forwarder) refreshUpstreams(r *dnsRunner) (bool, error) {
	// The containerd runtime points the guest's resolv.conf at this server;
	// asking itself would loop.
	ups := slices.DeleteFunc(s.Upstreams(r.given), func(u string) bool { return u == r.ip })
	return r.srv.setUpstreams(ups)
}

// followUpstreams keeps r's upstreams on the guest's current resolvers
// until ctx ends, and logs each change: the guest's DNS is a boot's most
// visible failure when it has none.
func (s *Forwarder) followUpstreams(ctx context.Context, r *dnsRunner) {
	t := time.NewTimer(dnsRecheckNone)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		changed, err := s.refreshUpstreams(r)
		s.mu.Unlock()
		ups := r.srv.currentUpstreams()
		switch {
		case err != nil:
			s.Logger().Warn("dns upstreams", "err", err)
		case changed:
			s.Logger().Info("dns upstreams changed", "upstreams", ups)
		}
		next := dnsRecheck
		if len(ups) == 0 {
			next = dnsRecheckNone
		}
		t.Reset(next)
	}
}

// Stop ends the DNS server, if any, and waits for it.
func (s *Forwarder) Stop() {
	s.mu.Lock()
	r := s.running
	s.running = nil
	s.mu.Unlock()
	if r != nil {
		r.stop()
		<-r.done
	}
}

// resolverWait bounds how long a runtime's start waits for the guest's
// resolvers. The boot does not wait for the network, and under TCG the
// DHCP lease can come a minute after the agent's setup, later than
// dockerd: a runtime reported ready before it would fail every pull and
// every container's lookup until then.
const resolverWait = time.Minute

// AwaitResolvers waits, within resolverWait, until the guest knows a
// resolver; without one it only says so, since the runtime works for
// everything but names.
func (s *Forwarder) AwaitResolvers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, resolverWait)
	defer cancel()
	began := time.Now()
	for {
		if ups := s.Refresh(); len(ups) > 0 {
			if waited := time.Since(began); waited > time.Second {
				s.Logger().Info("the guest's resolvers came", "upstreams", ups, "waited", waited.Round(time.Millisecond))
			}
			return
		}
		select {
		case <-ctx.Done():
			s.Logger().Warn("the guest has no resolver yet: outside names do not resolve until its DHCP lease names one", "waited", time.Since(began).Round(time.Second))
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Refresh looks for the guest's resolvers now and returns them, as
// the forwarder's upstreams when it runs.
func (s *Forwarder) Refresh() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.running; r != nil {
		if changed, err := s.refreshUpstreams(r); changed && err == nil {
			s.Logger().Info("dns upstreams changed", "upstreams", r.srv.currentUpstreams())
		}
		return r.srv.currentUpstreams()
	}
	return s.Upstreams(nil)
}

// CurrentUpstreams are the forwarder's upstreams, or the guest's own
// resolvers when no forwarder runs; never nil.
func (s *Forwarder) CurrentUpstreams() []string {
	s.mu.Lock()
	r := s.running
	s.mu.Unlock()
	if r != nil {
		return append([]string{}, r.srv.currentUpstreams()...)
	}
	return append([]string{}, s.Upstreams(nil)...)
}

// IP is the address containers should use as their resolver, or "" when
// no DNS server runs.
func (s *Forwarder) IP() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.running; r != nil {
		return r.ip
	}
	return ""
}

// Addr is where the DNS server listens, or "".
func (s *Forwarder) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.running; r != nil {
		return r.srv.self
	}
	return ""
}

// Setup starts the DNS server on the host access IP and says whether
// it runs, so the host access rules keep its port out of the redirect.
// Failing here is not fatal to setup: containers then keep the guest's
// resolvers (dockerd's "dns" is only set while the server runs) and lose
// only host.docker.internal.
func (s *Forwarder) Setup(ip string, given []string) bool {
	if err := s.Start(ip, given); err != nil {
		s.Logger().Warn("no DNS server for containers; host.docker.internal resolves only with --add-host", "err", err)
		return false
	}
	return true
}
