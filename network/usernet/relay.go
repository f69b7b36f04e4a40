package usernet

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/containers/gvisor-tap-vsock/pkg/tcpproxy"
	"github.com/miekg/dns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// maxPendingTCP bounds the guest's connections being dialled on the host
// at once; more are dropped until some complete (the guest retries its
// SYN). Limits.PendingDialsPerDest keeps one destination from taking them
// all.
const maxPendingTCP = 256

// dialTimeout bounds a host dial for the guest. A reachable server answers
// a SYN within a few round trips; a destination that drops SYNs holds its
// dial (and its slot) for this long, and the guest then sees a reset.
const dialTimeout = 10 * time.Second

// metadataIPs are cloud metadata services outside link-local: Alibaba
// Cloud's (in 100.64/10, of which only this address is refused: Tailscale
// and carrier-grade NAT use the rest) and Azure's wire server. Like
// 169.254.169.254 they hand out the host's credentials to whoever asks
// from the host, which a container is not.
var metadataIPs = []net.IP{net.IPv4(100, 100, 100, 200), net.IPv4(168, 63, 129, 16)}

// hostTarget is where a guest packet to dst goes on the host, or "" when
// the stack lets it nowhere: everything when isolated, link-local and the
// other cloud metadata addresses always (metadata services are not the
// guest's to reach), and the gateway addresses meaning the host's
// loopback as on slirp.
func (s *Stack) hostTarget(dst tcpip.Address, port uint16) string {
	if s.cfg.Isolated {
		return ""
	}
	ip := net.IP(dst.AsSlice())
	if ip.IsLinkLocalUnicast() || ip.Equal(net.IPv4bcast) || ip.IsMulticast() || slices.ContainsFunc(metadataIPs, ip.Equal) {
		return ""
	}
	if ip.Equal(net.ParseIP(GatewayIP)) || ip.Equal(net.ParseIP(DNSIP)) {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
}

func (s *Stack) tcpForwarder() *tcp.Forwarder {
	return tcp.NewForwarder(s.stack, 0, maxPendingTCP, func(r *tcp.ForwarderRequest) {
		defer s.recoverPanic("a TCP relay")
		id := r.ID()
		target := s.hostTarget(id.LocalAddress, id.LocalPort)
		if target == "" {
			r.Complete(true)
			return
		}
		if !takeSlot(&s.tcpRelays, s.limits.TCPRelays) {
			s.noteCap(capTCP, "limit", s.limits.TCPRelays)
			r.Complete(true)
			return
		}
		defer s.tcpRelays.Add(-1)
		if s.cfg.Secrets != nil && id.LocalPort == httpsPort {
			s.interceptTLS(r, target)
			return
		}
		outbound := s.dialForGuest(r, target)
		if outbound == nil {
			return
		}
		var wq waiter.Queue
		ep, tcpErr := r.CreateEndpoint(&wq)
		r.Complete(false)
		if tcpErr != nil {
			outbound.Close()
			return
		}
		proxy := tcpproxy.DialProxy{DialContext: func(context.Context, string, string) (net.Conn, error) { return outbound, nil }}
		proxy.HandleConn(gonet.NewTCPConn(&wq, ep))
	})
}

// dialForGuest dials target for r's SYN within the destination's share
// of pending dials. nil: r is complete (its SYN dropped for the guest to
// retry, or reset because the dial failed).
func (s *Stack) dialForGuest(r *tcp.ForwarderRequest, target string) net.Conn {
	dst := r.ID().LocalAddress
	if !s.dials.begin(dst, s.limits.PendingDialsPerDest) {
		s.noteCap(capDials, "destination", target, "limit", s.limits.PendingDialsPerDest)
		r.Complete(false) // no reset: the SYN is dropped, as the destination itself does
		return nil
	}
	defer s.dials.end(dst)
	var d net.Dialer
	ctx, cancel := context.WithTimeout(s.ctx, dialTimeout)
	defer cancel()
	outbound, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		s.counts.hostDialsFailed.Add(1)
		r.Complete(true) // the guest sees the refusal as a reset
		return nil
	}
	return outbound
}

func (s *Stack) udpForwarder() *udp.Forwarder {
	return udp.NewForwarder(s.stack, func(r *udp.ForwarderRequest) {
		defer s.recoverPanic("a UDP flow's setup")
		id := r.ID()
		target := s.hostTarget(id.LocalAddress, id.LocalPort)
		if target == "" || id.LocalAddress == header.IPv4Broadcast {
			return
		}
		var wq waiter.Queue
		ep, tcpErr := r.CreateEndpoint(&wq)
		if tcpErr != nil {
			return
		}
		guest := gonet.NewUDPConn(&wq, ep)
		host, err := net.Dial("udp", target)
		if err != nil {
			guest.Close()
			return
		}
		idle := s.cfg.UDPIdle
		if requestResponsePorts[id.LocalPort] {
			idle = min(idle, requestResponseIdle)
		}
		flow := &udpFlow{guest: guest, host: host}
		flow.last.Store(time.Now().UnixNano())
		if s.udp.add(flow, s.limits.UDPFlows) != nil {
			s.noteCap(capUDP, "limit", s.limits.UDPFlows)
		}
		go func() {
			defer s.recoverPanic("a UDP flow")
			defer s.udp.remove(flow)
			flow.relay(idle)
		}()
	})
}

// requestResponsePorts are UDP ports whose flows are one question and its
// answer (DNS): a container asking another resolver than the guest's opens
// a flow per lookup, and a lookup storm kept one host socket each for the
// whole idle time. Their flows end after requestResponseIdle instead.
// Swapped by tests, which cannot serve port 53.
var requestResponsePorts = map[uint16]bool{53: true}

// requestResponseIdle outlasts a resolver's retry (glibc waits 5 s by
// default, and a retry after the flow ended simply opens a new one) and
// leaves a storm's sockets gone well within 10 s.
const requestResponseIdle = 5 * time.Second

// startDNS answers the guest's queries on the gateway and slirp's DNS
// address through the host's resolver at query time (Go's, which re-reads
// /etc/resolv.conf when it changes), so a VPN coming up or a network change
// on the host reaches the guest without a restart.
func (s *Stack) startDNS() error {
	for _, ip := range []string{GatewayIP, DNSIP} {
		addr := tcpip.FullAddress{NIC: nicID, Addr: addr4(net.ParseIP(ip)), Port: 53}
		udpConn, err := gonet.DialUDP(s.stack, &addr, nil, ipv4.ProtocolNumber)
		if err != nil {
			return fmt.Errorf("usernet DNS on %s: %w", ip, err)
		}
		tcpLn, err := gonet.ListenTCP(s.stack, addr, ipv4.ProtocolNumber)
		if err != nil {
			udpConn.Close()
			return fmt.Errorf("usernet DNS on %s: %w", ip, err)
		}
		s.onClose(func() { udpConn.Close(); tcpLn.Close() })
		h := hostDNS{resolver: &net.Resolver{}}
		udpServer := &dns.Server{PacketConn: dnsPacketConn{PacketConn: udpConn, limit: &s.dns}, Handler: s.guarded(h.serveUDP)}
		tcpServer := &dns.Server{Listener: dnsListener{Listener: tcpLn, limit: &s.dns}, Handler: s.guarded(h.serveTCP)}
		s.counts.dnsServing.Add(2)
		go s.logStop("DNS over UDP", s.countServing(udpServer.ActivateAndServe))
		go s.logStop("DNS over TCP", s.countServing(tcpServer.ActivateAndServe))
	}
	return nil
}

// guarded keeps a panic in one query's answer from ending the stack.
func (s *Stack) guarded(serve dns.HandlerFunc) dns.HandlerFunc {
	return func(w dns.ResponseWriter, q *dns.Msg) {
		defer s.recoverPanic("a DNS query")
		serve(w, q)
	}
}

// dnsServeLoops: UDP and TCP on the gateway's and the DNS address.
const dnsServeLoops = 4

// countServing is serve, counted in dnsServing while it runs.
func (s *Stack) countServing(serve func() error) func() error {
	return func() error {
		defer s.counts.dnsServing.Add(-1)
		return serve()
	}
}

func (s *Stack) logStop(what string, serve func() error) {
	defer s.recoverPanic(what)
	if err := serve(); err != nil && s.ctx.Err() == nil {
		s.log.Warn("usernet "+what+" stopped", "err", err)
	}
}
