package dnsforward

import (
	"context"
	"log/slog"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/vmdock/vmdock/agent/lenprefix"
)

var upstreamIP = [4]byte{192, 0, 2, 7}

// fakeUpstream answers every A query with upstreamIP on UDP and TCP on one
// loopback port, counting the queries it saw.
type fakeUpstream struct {
	addr  string
	count atomic.Int32
}

// udpAndTCPOnOnePort listens on one loopback port for both, as a DNS
// server does. The OS picks a free UDP port; its TCP twin can be some
// other test's connection, so a taken one means another try.
func udpAndTCPOnOnePort(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	for try := 0; ; try++ {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		must(t, err)
		l, err := net.Listen("tcp4", pc.LocalAddr().String())
		if err == nil {
			return pc, l
		}
		pc.Close()
		if try == 20 {
			t.Fatalf("no loopback port free for both UDP and TCP: %v", err)
		}
	}
}

func startFakeUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	pc, l := udpAndTCPOnOnePort(t)
	t.Cleanup(func() { pc.Close(); l.Close() })
	u := &fakeUpstream{addr: pc.LocalAddr().String()}
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := u.reply(buf[:n]); resp != nil {
				pc.WriteTo(resp, from)
			}
		}
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				msg, err := lenprefix.ReadFrame(c)
				if err != nil {
					return
				}
				if resp := u.reply(msg); resp != nil {
					lenprefix.Write(c, resp)
				}
			}()
		}
	}()
	return u
}

func (u *fakeUpstream) reply(msg []byte) []byte {
	u.count.Add(1)
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, RecursionAvailable: true})
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 5}, dnsmessage.AResource{A: upstreamIP})
	out, _ := b.Finish()
	return out
}

func query(t *testing.T, name string, typ dnsmessage.Type, id uint16) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	must(t, b.StartQuestions())
	must(t, b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}))
	out, err := b.Finish()
	must(t, err)
	return out
}

// ask sends q to addr over network and parses the answer.
func ask(t *testing.T, network, addr string, q []byte) (dnsmessage.Message, time.Duration) {
	t.Helper()
	start := time.Now()
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	must(t, err)
	defer c.Close()
	must(t, c.SetDeadline(time.Now().Add(8*time.Second)))
	var resp []byte
	if network == "tcp" {
		must(t, lenprefix.Write(c, q))
		resp, err = lenprefix.ReadFrame(c)
		must(t, err)
	} else {
		_, err = c.Write(q)
		must(t, err)
		buf := make([]byte, 65535)
		n, err := c.Read(buf)
		must(t, err)
		resp = buf[:n]
	}
	var m dnsmessage.Message
	must(t, m.Unpack(resp))
	return m, time.Since(start)
}

func answerIPs(m dnsmessage.Message) [][4]byte {
	var out [][4]byte
	for _, a := range m.Answers {
		if r, ok := a.Body.(*dnsmessage.AResource); ok {
			out = append(out, r.A)
		}
	}
	return out
}

// startTestDNS runs s's DNS server on a loopback port with the given
// upstreams, answering the local names with 10.254.254.254.
func startTestDNS(t *testing.T, s *Forwarder, upstreams []string) string {
	t.Helper()
	must(t, s.StartOn("127.0.0.1:0", "10.254.254.254", upstreams))
	t.Cleanup(s.Stop)
	return s.Addr()
}

func TestDNSServer(t *testing.T) {
	up := startFakeUpstream(t)
	s, _ := newTestServer(t)
	addr := startTestDNS(t, s, []string{up.addr})
	local := [4]byte{10, 254, 254, 254}
	tests := []struct {
		name      string
		qname     string
		typ       dnsmessage.Type
		want      [][4]byte
		forwarded bool
	}{
		{"host A", "host.docker.internal.", dnsmessage.TypeA, [][4]byte{local}, false},
		{"any case", "HOST.Docker.Internal.", dnsmessage.TypeA, [][4]byte{local}, false},
		{"gateway A", "gateway.docker.internal.", dnsmessage.TypeA, [][4]byte{local}, false},
		{"host AAAA is empty", "host.docker.internal.", dnsmessage.TypeAAAA, nil, false},
		{"other name forwarded", "example.com.", dnsmessage.TypeA, [][4]byte{upstreamIP}, true},
		{"suffix is not local", "x.host.docker.internal.", dnsmessage.TypeA, [][4]byte{upstreamIP}, true},
		{"container domain", "web.vmdock.localhost.", dnsmessage.TypeA, [][4]byte{local}, false},
		{"compose domain any case", "API.Shop.VMDock.localhost.", dnsmessage.TypeA, [][4]byte{local}, false},
		{"domain zone itself", "vmdock.localhost.", dnsmessage.TypeA, [][4]byte{local}, false},
		{"container domain AAAA is empty", "web.vmdock.localhost.", dnsmessage.TypeAAAA, nil, false},
		{"lookalike zone forwarded", "web.notvmdock.localhost.", dnsmessage.TypeA, [][4]byte{upstreamIP}, true},
	}
	for _, network := range []string{"udp", "tcp"} {
		for i, tt := range tests {
			t.Run(network+" "+tt.name, func(t *testing.T) {
				before := up.count.Load()
				id := uint16(1000 + i)
				m, _ := ask(t, network, addr, query(t, tt.qname, tt.typ, id))
				if m.ID != id || !m.Response || m.RCode != dnsmessage.RCodeSuccess {
					t.Fatalf("header = %+v, want a NOERROR response with ID %d", m.Header, id)
				}
				if len(m.Questions) != 1 || !strings.EqualFold(m.Questions[0].Name.String(), tt.qname) {
					t.Fatalf("questions = %+v", m.Questions)
				}
				if got := answerIPs(m); !slices.Equal(got, tt.want) || len(m.Answers) != len(tt.want) {
					t.Fatalf("answers = %+v, want A %v", m.Answers, tt.want)
				}
				if got := up.count.Load() != before; got != tt.forwarded {
					t.Fatalf("forwarded = %v, want %v", got, tt.forwarded)
				}
			})
		}
	}
}

func TestDNSServerFailures(t *testing.T) {
	// A port with nothing behind it: loopback refuses at once.
	dead, err := net.ListenPacket("udp4", "127.0.0.1:0")
	must(t, err)
	deadAddr := dead.LocalAddr().String()
	dead.Close()
	// A resolver that never answers.
	silent, err := net.ListenPacket("udp4", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { silent.Close() })
	up := startFakeUpstream(t)

	tests := []struct {
		name      string
		upstreams []string
		rcode     dnsmessage.RCode
		within    time.Duration
	}{
		{"no upstream", nil, dnsmessage.RCodeServerFailure, 500 * time.Millisecond},
		{"refused upstream", []string{deadAddr}, dnsmessage.RCodeServerFailure, time.Second},
		{"silent upstream times out", []string{silent.LocalAddr().String()}, dnsmessage.RCodeServerFailure, dnsUpstreamTimeout + time.Second},
		{"falls through to the next", []string{deadAddr, up.addr}, dnsmessage.RCodeSuccess, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t)
			addr := startTestDNS(t, s, tt.upstreams)
			m, took := ask(t, "udp", addr, query(t, "example.com.", dnsmessage.TypeA, 7))
			if m.RCode != tt.rcode || m.ID != 7 {
				t.Fatalf("rcode %v id %d, want %v id 7", m.RCode, m.ID, tt.rcode)
			}
			if took > tt.within {
				t.Fatalf("took %v, want under %v", took, tt.within)
			}
			// The local names never need an upstream.
			m, _ = ask(t, "udp", addr, query(t, "host.docker.internal.", dnsmessage.TypeA, 8))
			if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 {
				t.Fatalf("host.docker.internal: %+v", m)
			}
		})
	}
}

func TestDNSAnswerGarbage(t *testing.T) {
	d, err := newDNSServer(discardLog(), net.IPv4(10, 254, 254, 254), "127.0.0.1:53")
	must(t, err)
	valid := query(t, "host.docker.internal.", dnsmessage.TypeA, 9)
	resp := slices.Clone(valid)
	resp[2] |= 0x80 // QR: a response, not a query
	tests := []struct {
		name string
		msg  []byte
		// rcode is the expected answer; -1 means no answer at all.
		rcode int
	}{
		{"empty", nil, -1},
		{"one byte", []byte{1}, -1},
		{"short header", make([]byte, 11), -1},
		{"response is not answered", resp, -1},
		{"header claims a question it lacks", []byte{0, 5, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}, int(dnsmessage.RCodeFormatError)},
		{"name cut short", valid[:len(valid)-6], int(dnsmessage.RCodeFormatError)},
		{"compression pointer loop", []byte{0, 6, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}, int(dnsmessage.RCodeFormatError)},
		{"label runs past the end", []byte{0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 63, 'a'}, int(dnsmessage.RCodeFormatError)},
		{"no question at all", []byte{0, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, int(dnsmessage.RCodeFormatError)},
		{"valid still works", valid, int(dnsmessage.RCodeSuccess)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := d.answer(context.Background(), tt.msg, false)
			if tt.rcode < 0 {
				if out != nil {
					t.Fatalf("answered %x, want silence", out)
				}
				return
			}
			var m dnsmessage.Message
			if err := m.Unpack(out); err != nil {
				t.Fatalf("answer %x does not parse: %v", out, err)
			}
			if int(m.RCode) != tt.rcode || !m.Response || m.ID != uint16(tt.msg[0])<<8|uint16(tt.msg[1]) {
				t.Fatalf("header = %+v, want rcode %d", m.Header, tt.rcode)
			}
		})
	}
	// Random bytes and mutated queries: never a panic, and any answer is
	// a well-formed response to the same ID.
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 5000; i++ {
		var msg []byte
		if i%2 == 0 {
			msg = make([]byte, rng.Intn(80))
			rng.Read(msg)
		} else {
			msg = slices.Clone(valid)
			for j := 0; j < 1+rng.Intn(4); j++ {
				msg[rng.Intn(len(msg))] = byte(rng.Intn(256))
			}
		}
		out := d.answer(context.Background(), msg, false)
		if out == nil {
			continue
		}
		var m dnsmessage.Message
		if err := m.Unpack(out); err != nil || !m.Response || m.ID != uint16(msg[0])<<8|uint16(msg[1]) {
			t.Fatalf("query %x: bad answer %x (%v)", msg, out, err)
		}
	}
}

func TestDNSServerSurvivesGarbage(t *testing.T) {
	s, _ := newTestServer(t)
	addr := startTestDNS(t, s, nil)
	u, err := net.Dial("udp", addr)
	must(t, err)
	defer u.Close()
	for _, g := range [][]byte{{}, {0xff}, make([]byte, 3000), []byte("GET / HTTP/1.1\r\n\r\n")} {
		_, err := u.Write(g)
		must(t, err)
	}
	c, err := net.Dial("tcp", addr)
	must(t, err)
	_, err = c.Write([]byte{0x00, 0x03, 0xff, 0xff, 0xff})
	must(t, err)
	// A broken TCP query ends the connection rather than hanging it.
	must(t, c.SetReadDeadline(time.Now().Add(2*time.Second)))
	if n, err := c.Read(make([]byte, 10)); n != 0 || err == nil {
		t.Fatalf("read %d, %v after garbage; want the connection closed", n, err)
	}
	c.Close()
	for _, network := range []string{"udp", "tcp"} {
		m, _ := ask(t, network, addr, query(t, "host.docker.internal.", dnsmessage.TypeA, 3))
		if len(answerIPs(m)) != 1 {
			t.Fatalf("%s after garbage: %+v", network, m)
		}
	}
}

func TestDNSServerStops(t *testing.T) {
	s, _ := newTestServer(t)
	must(t, s.StartOn("127.0.0.1:0", "10.254.254.254", nil))
	addr := s.Addr()
	// An idle TCP client must not keep the server from stopping.
	c, err := net.Dial("tcp", addr)
	must(t, err)
	defer c.Close()
	done := make(chan struct{})
	go func() { s.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("stopDNS did not return")
	}
	if s.IP() != "" || s.Addr() != "" {
		t.Fatal("server still registered after stop")
	}
	if l, err := net.Listen("tcp4", addr); err != nil {
		t.Fatalf("port still taken after stop: %v", err)
	} else {
		l.Close()
	}
}

func TestDNSRestartUpdatesUpstreams(t *testing.T) {
	up := startFakeUpstream(t)
	s, _ := newTestServer(t)
	addr := startTestDNS(t, s, nil)
	m, _ := ask(t, "udp", addr, query(t, "example.com.", dnsmessage.TypeA, 1))
	if m.RCode != dnsmessage.RCodeServerFailure {
		t.Fatalf("rcode %v without upstream", m.RCode)
	}
	// A second setup keeps the listener and takes the new upstreams.
	must(t, s.StartOn("127.0.0.1:0", "10.254.254.254", []string{up.addr}))
	if s.Addr() != addr {
		t.Fatalf("listener moved from %s to %s", addr, s.Addr())
	}
	m, _ = ask(t, "udp", addr, query(t, "example.com.", dnsmessage.TypeA, 2))
	if got := answerIPs(m); len(got) != 1 || got[0] != upstreamIP {
		t.Fatalf("after new upstreams: %+v", m)
	}
	if err := s.StartOn("127.0.0.1:0", "10.254.254.254", []string{"resolver.example"}); err == nil {
		t.Fatal("upstream name: want an error")
	}
}

func TestDNSUpstreams(t *testing.T) {
	tests := []struct {
		name  string
		given []string
		files map[string]string
		want  []string
	}{
		{"given wins", []string{"1.1.1.1"}, map[string]string{LeasesDir + "/2": "DNS=10.0.2.3\n"}, []string{"1.1.1.1"}},
		{"dhcp lease", nil, map[string]string{LeasesDir + "/2": "DNS=10.0.2.3 10.0.2.4\n", "etc/resolv.conf": "nameserver 9.9.9.9\n"}, []string{"10.0.2.3", "10.0.2.4"}},
		{"resolved upstreams", nil, map[string]string{"run/systemd/resolve/resolv.conf": "# x\nnameserver 10.0.2.3\nnameserver fe80::1%eth0\nsearch lan\n", "etc/resolv.conf": "nameserver 127.0.0.53\n"}, []string{"10.0.2.3"}},
		{"resolv.conf", nil, map[string]string{"etc/resolv.conf": "nameserver 192.0.2.9\noptions edns0\n"}, []string{"192.0.2.9"}},
		// Resolved without upstreams of its own: its stub would fail every
		// query while the list looked fine.
		{"resolved's stub only", nil, map[string]string{"etc/resolv.conf": "nameserver 127.0.0.53\noptions edns0\n"}, nil},
		{"isolated", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t)
			for f, body := range tt.files {
				p := filepath.Join(s.Root, f)
				must(t, os.MkdirAll(filepath.Dir(p), 0o755))
				must(t, os.WriteFile(p, []byte(body), 0o644))
			}
			if got := s.Upstreams(tt.given); !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// The server starts before the DHCP lease names the guest's resolvers
// (nothing in the boot waits for the network): it takes them when the
// lease comes, and the next lease's when the network changes.
func TestDNSFollowsLease(t *testing.T) {
	s, _ := newTestServer(t)
	startTestDNS(t, s, nil)
	lease := filepath.Join(s.Root, LeasesDir, "2")
	must(t, os.MkdirAll(filepath.Dir(lease), 0o755))
	waitUpstreams := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(3 * dnsRecheck)
		for {
			s.mu.Lock()
			got := s.running.srv.currentUpstreams()
			s.mu.Unlock()
			if slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("upstreams %q, want %q", got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitUpstreams()
	must(t, os.WriteFile(lease, []byte("ADDRESS=10.0.2.15\nDNS=10.0.2.3\n"), 0o644))
	waitUpstreams("10.0.2.3:53")
	must(t, os.WriteFile(lease, []byte("ADDRESS=192.168.64.5\nDNS=192.168.64.1\n"), 0o644))
	waitUpstreams("192.168.64.1:53")
}

// A runtime's start waits for the lease's resolvers, and is not held
// longer than it takes them to come.
func TestRuntimeStartAwaitsResolvers(t *testing.T) {
	s, _ := newTestServer(t)
	startTestDNS(t, s, nil)
	lease := filepath.Join(s.Root, LeasesDir, "2")
	must(t, os.MkdirAll(filepath.Dir(lease), 0o755))
	done := make(chan time.Time)
	go func() { s.AwaitResolvers(context.Background()); done <- time.Now() }()
	time.Sleep(300 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("returned before the guest had a resolver")
	default:
	}
	wrote := time.Now()
	must(t, os.WriteFile(lease, []byte("DNS=10.0.2.3\n"), 0o644))
	select {
	case at := <-done:
		if waited := at.Sub(wrote); waited > 2*time.Second {
			t.Errorf("returned %s after the lease", waited)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting 10 s after the lease")
	}
	if got := s.CurrentUpstreams(); !slices.Equal(got, []string{"10.0.2.3:53"}) {
		t.Errorf("upstreams %q after the wait", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s2, _ := newTestServer(t)
	s2.AwaitResolvers(ctx) // a cancelled start is not held
}

func TestSetUpstreams(t *testing.T) {
	d, err := newDNSServer(discardLog(), net.IPv4(10, 254, 254, 254), "10.254.254.254:53")
	must(t, err)
	changed, err := d.setUpstreams([]string{"10.0.2.3", "10.254.254.254", "10.0.2.3:53", "::1", "127.0.0.1:5353", "8.8.8.8"})
	if err != nil || !changed {
		t.Fatalf("first upstreams: changed %v, %v", changed, err)
	}
	want := []string{"10.0.2.3:53", "[::1]:53", "127.0.0.1:5353"}
	if got := d.currentUpstreams(); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q (self and duplicates dropped, at most %d)", got, want, dnsMaxUpstreams)
	}
	for _, bad := range []string{"dns.example", "10.0.2.3:", ":53", "10.0.2"} {
		if _, err := d.setUpstreams([]string{bad}); err == nil {
			t.Errorf("upstream %q: want an error", bad)
		}
	}
	if _, err := newDNSServer(discardLog(), net.ParseIP("::1"), ""); err == nil {
		t.Error("IPv6 answer address: want an error")
	}
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestDNSNeverForwardsToItself(t *testing.T) {
	s, _ := newTestServer(t)
	must(t, s.StartOn("127.0.0.1:0", "10.254.254.254", []string{"10.254.254.254", "192.0.2.53"}))
	t.Cleanup(s.Stop)
	s.mu.Lock()
	ups := s.running.srv.currentUpstreams()
	s.mu.Unlock()
	if slices.Contains(ups, "10.254.254.254:53") || slices.Contains(ups, "10.254.254.254") || len(ups) != 1 {
		t.Errorf("upstreams %v", ups)
	}
}

// While the server runs, containers are pointed at its address.
func TestIPWhileRunning(t *testing.T) {
	s, _ := newTestServer(t)
	startTestDNS(t, s, nil)
	if s.IP() != "10.254.254.254" {
		t.Fatalf("IP %q, want the answer address", s.IP())
	}
}
