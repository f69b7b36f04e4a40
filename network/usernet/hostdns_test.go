package usernet

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestHostDNSSaysWhyALookupFailed: a name the host's resolver says does
// not exist is NXDOMAIN, found records are answered, and a host resolver
// that cannot be asked (the host offline) is SERVFAIL, not NXDOMAIN,
// which guests cache as an answer.
func TestHostDNSSaysWhyALookupFailed(t *testing.T) {
	upstream := startTestResolver(t, map[string]string{"found.test.": "198.18.0.7"})
	reachable := hostDNS{resolver: resolverVia(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", upstream)
	})}
	offline := hostDNS{resolver: resolverVia(func(context.Context) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "udp", Err: errNetworkDown{}}
	})}
	for _, tc := range []struct {
		name  string
		h     hostDNS
		qname string
		qtype uint16
		rcode int
		want  string
	}{
		{"found", reachable, "found.test.", dns.TypeA, dns.RcodeSuccess, "198.18.0.7"},
		{"no such name", reachable, "missing.test.", dns.TypeA, dns.RcodeNameError, ""},
		{"AAAA on an IPv4 stack", reachable, "found.test.", dns.TypeAAAA, dns.RcodeSuccess, ""},
		{"host offline", offline, "found.test.", dns.TypeA, dns.RcodeServerFailure, ""},
		{"host offline, MX", offline, "found.test.", dns.TypeMX, dns.RcodeServerFailure, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			q := new(dns.Msg).SetQuestion(tc.qname, tc.qtype)
			m := tc.h.answer(ctx, q)
			if m.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
			if m.Id != q.Id || !m.Response {
				t.Errorf("not a reply to the query: %v", m)
			}
			got := ""
			if len(m.Answer) == 1 {
				if a, ok := m.Answer[0].(*dns.A); ok {
					got = a.A.String()
				}
			}
			if got != tc.want || len(m.Answer) > 1 {
				t.Errorf("answer %v, want %q", m.Answer, tc.want)
			}
		})
	}
	if m := reachable.answer(context.Background(), &dns.Msg{}); m.Rcode != dns.RcodeFormatError {
		t.Errorf("a query without a question: rcode %s, want FORMERR", dns.RcodeToString[m.Rcode])
	}
}

type errNetworkDown struct{}

func (errNetworkDown) Error() string   { return "network is down" }
func (errNetworkDown) Timeout() bool   { return false }
func (errNetworkDown) Temporary() bool { return true }

// resolverVia is Go's own resolver sending every query through dial.
func resolverVia(dial func(context.Context) (net.Conn, error)) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}
}

// startTestResolver serves A records for names on loopback UDP and
// NXDOMAIN for every other name; it returns its address.
func startTestResolver(t *testing.T, names map[string]string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg).SetReply(q)
		ip, ok := names[q.Question[0].Name]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Question[0].Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)})
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}
