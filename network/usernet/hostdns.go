package usernet

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/miekg/dns"
)

// hostLookupTimeout bounds one host lookup for a guest's query: a guest
// resolver gives up after a few seconds anyway, and a lookup left running
// past that only holds one of the stack's DNS slots.
const hostLookupTimeout = 10 * time.Second

// hostDNS answers the guest's queries through the host's resolver at
// query time (Go's, which re-reads /etc/resolv.conf when it changes, or
// the system's on macOS, so a VPN's own resolvers count).
//
// The rcode says why a lookup failed: NXDOMAIN only when the host's
// resolver said the name does not exist, SERVFAIL when it could not be
// asked (the host offline, its resolver gone during a network change).
// A guest or a container caches NXDOMAIN as an answer (negative caching,
// and some clients never ask again), so an outage answered with it
// outlived the outage.
type hostDNS struct {
	resolver *net.Resolver
}

func (h hostDNS) serveUDP(w dns.ResponseWriter, q *dns.Msg) { h.serve(w, q, dns.MinMsgSize) }
func (h hostDNS) serveTCP(w dns.ResponseWriter, q *dns.Msg) { h.serve(w, q, dns.MaxMsgSize) }

func (h hostDNS) serve(w dns.ResponseWriter, q *dns.Msg, size int) {
	ctx, cancel := context.WithTimeout(context.Background(), hostLookupTimeout)
	defer cancel()
	m := h.answer(ctx, q)
	if e := q.IsEdns0(); e != nil {
		size = int(e.UDPSize())
	}
	m.Truncate(size)
	_ = w.WriteMsg(m)
}

// answer is the reply to q: the records of its one question the host's
// resolver has, or the rcode of why it has none.
func (h hostDNS) answer(ctx context.Context, q *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	if len(q.Question) != 1 {
		return m.SetRcode(q, dns.RcodeFormatError)
	}
	m.SetReply(q)
	m.RecursionAvailable = true
	question := q.Question[0]
	if question.Qclass != dns.ClassINET {
		return m.SetRcode(q, dns.RcodeNotImplemented)
	}
	answers, err := h.lookup(ctx, question)
	if err != nil {
		return m.SetRcode(q, lookupRcode(err))
	}
	m.Answer = answers
	return m
}

// lookupRcode is the rcode for a failed host lookup.
func lookupRcode(err error) int {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return dns.RcodeNameError
	}
	return dns.RcodeServerFailure
}

// lookup asks the host's resolver for q's records. The stack is IPv4
// only, so AAAA and the types the resolver cannot ask for get an empty
// answer, which sends a client on to A.
func (h hostDNS) lookup(ctx context.Context, q dns.Question) ([]dns.RR, error) {
	hdr := func(t uint16) dns.RR_Header { return dns.RR_Header{Name: q.Name, Rrtype: t, Class: dns.ClassINET} }
	var rrs []dns.RR
	switch q.Qtype {
	case dns.TypeA:
		addrs, err := h.resolver.LookupNetIP(ctx, "ip4", q.Name)
		for _, a := range addrs {
			rrs = append(rrs, &dns.A{Hdr: hdr(dns.TypeA), A: net.IP(a.Unmap().AsSlice())})
		}
		return rrs, err
	case dns.TypeCNAME:
		cname, err := h.resolver.LookupCNAME(ctx, q.Name)
		if err != nil {
			return nil, err
		}
		return []dns.RR{&dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: cname}}, nil
	case dns.TypeMX:
		mxs, err := h.resolver.LookupMX(ctx, q.Name)
		for _, mx := range mxs {
			rrs = append(rrs, &dns.MX{Hdr: hdr(dns.TypeMX), Mx: mx.Host, Preference: mx.Pref})
		}
		return rrs, err
	case dns.TypeNS:
		nss, err := h.resolver.LookupNS(ctx, q.Name)
		for _, ns := range nss {
			rrs = append(rrs, &dns.NS{Hdr: hdr(dns.TypeNS), Ns: ns.Host})
		}
		return rrs, err
	case dns.TypeSRV:
		_, srvs, err := h.resolver.LookupSRV(ctx, "", "", q.Name)
		for _, s := range srvs {
			rrs = append(rrs, &dns.SRV{Hdr: hdr(dns.TypeSRV), Port: s.Port, Priority: s.Priority, Target: s.Target, Weight: s.Weight})
		}
		return rrs, err
	case dns.TypeTXT:
		txts, err := h.resolver.LookupTXT(ctx, q.Name)
		if err != nil {
			return nil, err
		}
		return []dns.RR{&dns.TXT{Hdr: hdr(dns.TypeTXT), Txt: txts}}, nil
	}
	return nil, nil
}
