package usernet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// egressTTL is the TTL of the sandbox DNS's answers: short, so a guest
// that caches asks again (and the addresses are pinned again) soon after
// the host's own answer changes.
const egressTTL = 30

// egressLookupTimeout bounds one host lookup for the guest.
const egressLookupTimeout = 5 * time.Second

// egressGate wraps a transport handler so that, with an egress policy, a
// packet of a flow the policy refuses is not handled: gVisor then answers
// it as a closed port does, a TCP reset or an ICMP port unreachable, so
// the guest fails at once instead of waiting out a timeout. Only packets
// of no existing flow reach the handler, so the check is per new flow.
func (s *Stack) egressGate(proto string, next func(stack.TransportEndpointID, *stack.PacketBuffer) bool) func(stack.TransportEndpointID, *stack.PacketBuffer) bool {
	policy := s.cfg.Egress
	if policy == nil {
		return next
	}
	gateway, dnsAddr := addr4(net.ParseIP(GatewayIP)), addr4(net.ParseIP(DNSIP))
	return func(id stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
		dst := id.LocalAddress
		ap := netip.AddrPortFrom(netip.AddrFrom4(dst.As4()), id.LocalPort)
		// The gateway addresses are the host's loopback: never the
		// sandbox's, whatever the rules say.
		if dst == gateway || dst == dnsAddr || dst == tcpip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return false
		}
		if !policy.Allows(proto, ap) {
			return false
		}
		return next(id, pkt)
	}
}

// startEgressDNS serves the guest's queries on the gateway and slirp's
// DNS address for a sandbox: names the policy allows are resolved by the
// host's resolver and their addresses pinned in the policy, every other
// name is REFUSED (and logged).
func (s *Stack) startEgressDNS() error {
	for _, ip := range []string{GatewayIP, DNSIP} {
		addr := tcpip.FullAddress{NIC: nicID, Addr: addr4(net.ParseIP(ip)), Port: 53}
		udpConn, err := gonet.DialUDP(s.stack, &addr, nil, ipv4.ProtocolNumber)
		if err != nil {
			return fmt.Errorf("usernet sandbox DNS on %s: %s", ip, err)
		}
		tcpLn, err := gonet.ListenTCP(s.stack, addr, ipv4.ProtocolNumber)
		if err != nil {
			udpConn.Close()
			return fmt.Errorf("usernet sandbox DNS on %s: %s", ip, err)
		}
		s.onClose(func() { udpConn.Close(); tcpLn.Close() })
		handler := dns.HandlerFunc(s.answerEgressQuery)
		udpServer := &dns.Server{PacketConn: dnsPacketConn{PacketConn: udpConn, limit: &s.dns}, Handler: handler}
		tcpServer := &dns.Server{Listener: dnsListener{Listener: tcpLn, limit: &s.dns}, Handler: handler}
		go s.logStop("sandbox DNS over UDP", udpServer.ActivateAndServe)
		go s.logStop("sandbox DNS over TCP", tcpServer.ActivateAndServe)
	}
	return nil
}

func (s *Stack) answerEgressQuery(w dns.ResponseWriter, q *dns.Msg) {
	defer s.recoverPanic("a sandbox DNS query")
	reply := new(dns.Msg)
	if len(q.Question) != 1 {
		_ = w.WriteMsg(reply.SetRcode(q, dns.RcodeFormatError))
		return
	}
	question := q.Question[0]
	if question.Qclass != dns.ClassINET || !s.cfg.Egress.AllowsName(question.Name) {
		_ = w.WriteMsg(reply.SetRcode(q, dns.RcodeRefused))
		return
	}
	reply.SetReply(q)
	reply.RecursionAvailable = true
	if question.Qtype != dns.TypeA {
		// The stack is IPv4-only: an allowed name has no other records
		// here (an empty answer, so the resolver moves on to A).
		_ = w.WriteMsg(reply)
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, egressLookupTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", question.Name)
	if err != nil {
		_ = w.WriteMsg(reply.SetRcode(q, lookupRcode(err)))
		return
	}
	s.cfg.Egress.Pin(question.Name, addrs)
	for _, a := range addrs {
		reply.Answer = append(reply.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: question.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: egressTTL},
			A:   net.IP(a.Unmap().AsSlice()),
		})
	}
	_ = w.WriteMsg(reply)
}
