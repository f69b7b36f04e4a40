package usernet

import (
	"fmt"
	"net"

	"github.com/miekg/dns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
)

// refuseDNS answers every query to the gateway and slirp's DNS address with
// REFUSED, for an isolated stack: a query nobody answers makes the guest's
// resolver (and every lookup behind it, a proxied docker pull's included)
// wait out its whole timeout, where slirp's refusal ended it at once. Over
// TCP the forwarder's reset already does.
func (s *Stack) refuseDNS() error {
	for _, ip := range []string{GatewayIP, DNSIP} {
		addr := tcpip.FullAddress{NIC: nicID, Addr: addr4(net.ParseIP(ip)), Port: 53}
		conn, err := gonet.DialUDP(s.stack, &addr, nil, ipv4.ProtocolNumber)
		if err != nil {
			return fmt.Errorf("usernet DNS refusal on %s: %s", ip, err)
		}
		s.onClose(func() { conn.Close() })
		go refuseQueries(conn)
	}
	return nil
}

func refuseQueries(conn net.PacketConn) {
	buf := make([]byte, 65535)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		var query dns.Msg
		if query.Unpack(buf[:n]) != nil || query.Response {
			continue
		}
		answer, err := new(dns.Msg).SetRcode(&query, dns.RcodeRefused).Pack()
		if err != nil {
			continue
		}
		_, _ = conn.WriteTo(answer, from)
	}
}
