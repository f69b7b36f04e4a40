package usernet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
)

// directHandshakes is how many published-port connections may be opening
// through the stack at once; the guest's kernel accepts them, so it is
// many, unlike slirp's hostfwd.
const directHandshakes = 64

// DirectPath reaches the guest's TCP and UDP ports through the stack itself: no
// host socket and no rule per port, the host agent dials the guest's
// address in-process (network/forward's DirectPath and DirectDialer).
type DirectPath struct{ s *Stack }

// Direct is the stack's path to the guest's ports.
func (s *Stack) Direct() DirectPath { return DirectPath{s: s} }

// OpenPort names guestPort on the guest's address; nothing to set up.
func (p DirectPath) OpenPort(_ context.Context, guestPort int) (string, error) {
	if guestPort < 1 || guestPort > 65535 {
		return "", fmt.Errorf("guest port %d: accepted: 1-65535", guestPort)
	}
	return net.JoinHostPort(GuestIP, strconv.Itoa(guestPort)), nil
}

// ClosePort has nothing to undo.
func (p DirectPath) ClosePort(context.Context, int) error { return nil }

// Handshakes: see directHandshakes.
func (p DirectPath) Handshakes() int { return directHandshakes }

// DialDirect dials addr (an address OpenPort returned) through the stack.
func (p DirectPath) DialDirect(ctx context.Context, addr string) (net.Conn, error) {
	full, err := stackAddr(addr)
	if err != nil {
		return nil, err
	}
	c, err := gonet.DialContextTCP(ctx, p.s.stack, full, ipv4.ProtocolNumber)
	if err != nil {
		return nil, fmt.Errorf("usernet dial %s: %w", addr, err)
	}
	return c, nil
}

// DialDirectUDP opens a connected datagram conn to addr (an address
// OpenPort returned) through the stack, from an ephemeral port of the
// gateway's address: the guest's replies come back to it alone.
func (p DirectPath) DialDirectUDP(_ context.Context, addr string) (net.Conn, error) {
	full, err := stackAddr(addr)
	if err != nil {
		return nil, err
	}
	c, err := gonet.DialUDP(p.s.stack, nil, &full, ipv4.ProtocolNumber)
	if err != nil {
		return nil, fmt.Errorf("usernet udp dial %s: %w", addr, err)
	}
	return c, nil
}

func stackAddr(addr string) (tcpip.FullAddress, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return tcpip.FullAddress{}, fmt.Errorf("usernet dial %q: accepted: an IPv4 address and port", addr)
	}
	return tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFrom4(ap.Addr().As4()), Port: ap.Port()}, nil
}
