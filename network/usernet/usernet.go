package usernet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containers/gvisor-tap-vsock/pkg/services/dhcp"
	"github.com/containers/gvisor-tap-vsock/pkg/tap"
	"github.com/containers/gvisor-tap-vsock/pkg/types"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/vmdock/vmdock/network/egress"
	"github.com/vmdock/vmdock/network/inject"
)

// The guest's addressing, slirp's: the image's eth0 takes it over DHCP on
// either stack.
const (
	Subnet    = "10.0.2.0/24"
	GatewayIP = "10.0.2.2" // also the host's loopback, as on slirp
	DNSIP     = "10.0.2.3" // slirp's DNS address, served too
	GuestIP   = "10.0.2.15"
	// GuestMAC is QEMU's default NIC address; the drivers set it
	// explicitly so the static lease always matches.
	GuestMAC = "52:54:00:12:34:56"
	// GatewayMAC is fixed so the guest's ARP cache survives a host agent
	// restart across a resumed VM.
	GatewayMAC = "5a:94:ef:e4:0c:dd"
	mtu        = 1500
	nicID      = 1
)

// DefaultUDPIdle is how long a guest UDP flow with no traffic keeps its
// host socket. Short: DNS and similar request/response flows are the bulk,
// and a long idle time piles up one host socket per flow.
const DefaultUDPIdle = 30 * time.Second

// Config is what the stack lets the guest do.
type Config struct {
	// Isolated lets nothing out: no TCP or UDP relayed to the host, and
	// DNS queries refused. DHCP still runs so the guest has its address; host access goes
	// through the guest agent's tunnel, not this stack.
	Isolated bool
	// UDPIdle: 0 means DefaultUDPIdle.
	UDPIdle time.Duration
	// Limits: a zero field means DefaultLimits' value.
	Limits Limits
	Log    *slog.Logger
	// Egress, when set, lets the guest's new flows out only where it
	// allows and its DNS answer only the names it allows (a sandbox).
	Egress *egress.Policy
	// Secrets, when set, takes the guest's connections to port 443 and
	// injects credentials into those to a secret's host.
	Secrets *inject.Proxy
}

// Stack is one VM's network.
type Stack struct {
	cfg     Config
	log     *slog.Logger
	stack   *stack.Stack
	sw      *tap.Switch
	ctx     context.Context
	cancel  context.CancelFunc
	closers []func()
	mu      sync.Mutex
	counts  stackCounts

	limits    Limits
	udp       udpFlows
	tcpRelays atomic.Int64
	dials     pendingDials
	dns       dnsLimit
	capped    [capKinds]atomic.Int64
}

// New builds the stack and starts its DHCP and DNS services (an isolated
// stack's DNS refuses every query); plug a NIC in with ServeQEMU or ServeVfkit.
func New(cfg Config) (*Stack, error) {
	if cfg.UDPIdle <= 0 {
		cfg.UDPIdle = DefaultUDPIdle
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	routeLibraryLog(cfg.Log)
	tcfg := &types.Configuration{
		MTU: mtu, Subnet: Subnet, GatewayIP: GatewayIP, GatewayMacAddress: GatewayMAC,
		GatewayVirtualIPs: []string{DNSIP},
		DHCPStaticLeases:  map[string]string{GuestIP: GuestMAC},
	}
	_, subnet, err := net.ParseCIDR(Subnet)
	if err != nil {
		return nil, fmt.Errorf("usernet subnet %q: %w", Subnet, err)
	}
	pool := tap.NewIPPool(subnet)
	pool.Reserve(net.ParseIP(GatewayIP), GatewayMAC)
	pool.Reserve(net.ParseIP(DNSIP), GatewayMAC)
	pool.Reserve(net.ParseIP(GuestIP), GuestMAC)

	link, err := tap.NewLinkEndpoint(false, mtu, GatewayMAC, GatewayIP, tcfg.GatewayVirtualIPs)
	if err != nil {
		return nil, fmt.Errorf("usernet link: %w", err)
	}
	sw := tap.NewSwitch(false, mtu)
	link.Connect(sw)
	sw.Connect(link)
	st, err := newNetstack(link, subnet)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Stack{cfg: cfg, log: cfg.Log, stack: st, sw: sw, ctx: ctx, cancel: cancel, limits: cfg.Limits.withDefaults()}
	s.dns.s, s.dns.max = s, s.limits.DNSInFlight
	s.onClose(s.udp.closeAll)
	if err := s.startServices(tcfg, pool); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func newNetstack(link stack.LinkEndpoint, subnet *net.IPNet) (*stack.Stack, error) {
	st := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4},
	})
	if err := st.CreateNIC(nicID, link); err != nil {
		return nil, fmt.Errorf("usernet NIC: %s", err)
	}
	for _, ip := range []string{GatewayIP, DNSIP} {
		addr := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: addr4(net.ParseIP(ip)).WithPrefix()}
		if err := st.AddProtocolAddress(nicID, addr, stack.AddressProperties{}); err != nil {
			return nil, fmt.Errorf("usernet address %s: %s", ip, err)
		}
	}
	// Spoofing and promiscuous mode let the stack take the guest's
	// connections to any address and answer from that address.
	st.SetSpoofing(nicID, true)
	st.SetPromiscuousMode(nicID, true)
	sub, err := tcpip.NewSubnet(tcpip.AddrFromSlice(subnet.IP.To4()), tcpip.MaskFromBytes(subnet.Mask))
	if err != nil {
		return nil, fmt.Errorf("usernet route: %w", err)
	}
	st.SetRouteTable([]tcpip.Route{{Destination: sub, NIC: nicID}})
	return st, nil
}

func (s *Stack) startServices(tcfg *types.Configuration, pool *tap.IPPool) error {
	s.stack.SetTransportProtocolHandler(tcp.ProtocolNumber, s.egressGate("tcp", s.tcpForwarder().HandlePacket))
	s.stack.SetTransportProtocolHandler(udp.ProtocolNumber, s.egressGate("udp", s.udpForwarder().HandlePacket))
	d, err := dhcp.New(tcfg, s.stack, pool)
	if err != nil {
		return fmt.Errorf("usernet DHCP: %w", err)
	}
	go s.logStop("DHCP", d.Serve)
	if s.cfg.Isolated {
		return s.refuseDNS()
	}
	if s.cfg.Egress != nil {
		return s.startEgressDNS()
	}
	return s.startDNS()
}

// ServeQEMU runs the NIC on conn with QEMU's stream framing (a 4-byte
// big-endian length before each frame: -netdev stream or socket) until
// conn closes or ctx ends.
func (s *Stack) ServeQEMU(ctx context.Context, conn net.Conn) error {
	return s.serve(ctx, conn, types.QemuProtocol)
}

// ServeVfkit runs the NIC on a datagram conn, one frame per datagram (vz's
// file handle attachment).
func (s *Stack) ServeVfkit(ctx context.Context, conn net.Conn) error {
	return s.serve(ctx, conn, types.VfkitProtocol)
}

func (s *Stack) serve(ctx context.Context, conn net.Conn, proto types.Protocol) (err error) {
	// The switch runs the guest's frames through the whole stack in this
	// goroutine; a panic anywhere in it ends this NIC, not the host agent.
	defer func() {
		if p := recover(); p != nil {
			s.notePanic("the NIC's frame handling", p)
			err = fmt.Errorf("usernet %s NIC: panic: %v", proto, p)
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	// The switch only looks at ctx between frames: closing conn is what
	// ends a blocked read.
	unblock := context.AfterFunc(ctx, func() { conn.Close() })
	defer unblock()
	err = s.sw.Accept(ctx, newFrameFilter(conn, proto == types.QemuProtocol, s.noteMalformed), proto)
	if err != nil && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("usernet %s NIC: %w", proto, err)
	}
	return nil
}

// Close stops the services; serving NICs return.
func (s *Stack) Close() {
	s.cancel()
	s.mu.Lock()
	closers := s.closers
	s.closers = nil
	s.mu.Unlock()
	for _, c := range closers {
		c()
	}
	s.stack.Close()
}

func (s *Stack) onClose(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closers = append(s.closers, f)
}

func addr4(ip net.IP) tcpip.Address { return tcpip.AddrFrom4Slice(ip.To4()) }
