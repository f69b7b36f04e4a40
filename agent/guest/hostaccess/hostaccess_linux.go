package hostaccess

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/dnsforward"
	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/internal/connpipe"
)

const hostAccessChain = "VMDOCK-HOST"

// HostAccess makes an address in the guest reach the host's loopback,
// for containers (host.docker.internal) as for the guest.
type HostAccess struct {
	guestos.Sys
	// OpenToHost opens a stream to the host on the current session.
	OpenToHost func(agent.Request) (net.Conn, error)
	// HideOwnPort keeps the agent's own listener out of the port watch:
	// forwarding it to the host would loop.
	HideOwnPort func(proto string, port int)
	// DNS is the DNS server for containers, started on the address.
	DNS *dnsforward.Forwarder

	mu       sync.Mutex
	listener net.Listener
	ip       string
}

// RulesFile is the iptables-restore input Setup loads;
// kept after the load, for a look at what the guest was given.
const RulesFile = "/run/vmdock/host-access.rules"

// Setup makes ip (and host.docker.internal) reach the host's
// loopback: ip lives on lo, iptables redirects tcp to it onto the agent's
// listener, and each connection becomes a host-dial stream. The DNS server
// for containers (given: the configured upstreams) starts on ip too.
func (s *HostAccess) Setup(ctx context.Context, ipStr string, given []string) error {
	ip := net.ParseIP(ipStr)
	if ip == nil || ip.To4() == nil {
		return fmt.Errorf("host access IP %q is not an IPv4 address", ipStr)
	}
	port, err := s.hostAccessListener()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.ip = ipStr
	s.mu.Unlock()
	if _, err := s.OS.Run(ctx, "ip", "addr", "replace", ipStr+"/32", "dev", "lo"); err != nil {
		return err
	}
	// The DNS server binds ip, so it needs ip on lo; it starts before the
	// rules are loaded so that its exemption goes in with them.
	dns := s.DNS.Setup(ipStr, given)
	if err := s.loadHostAccessRules(ctx, ipStr, port, dns); err != nil {
		return err
	}
	return s.EditHosts(ipStr, ipStr+"\thost.docker.internal")
}

// loadHostAccessRules fills the host access chain and jumps to it in one
// iptables-restore, after one listing that says which jumps exist: two
// processes where one iptables per rule took eight to ten, each a good
// part of a second under TCG.
func (s *HostAccess) loadHostAccessRules(ctx context.Context, ip string, port int, exemptDNS bool) error {
	listing, err := s.OS.Run(ctx, "iptables", "-t", "nat", "-S")
	if err != nil {
		return fmt.Errorf("list the nat table: %w", err)
	}
	p := s.Path(RulesFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("host access rules: %w", err)
	}
	if err := guestos.WriteFile(p, []byte(hostAccessRestore(ip, port, exemptDNS, string(listing))), 0o600); err != nil {
		return fmt.Errorf("host access rules: %w", err)
	}
	if _, err := s.OS.Run(ctx, "iptables-restore", "--noflush", p); err != nil {
		return fmt.Errorf("load %s: %w", RulesFile, err)
	}
	return nil
}

// hostAccessRestore is the iptables-restore input for the host access
// chain, given the nat table's current `iptables -S` listing. Declaring
// the chain creates it, or with --noflush empties it, so a second setup
// refills it rather than adding to it. Port 53 of ip is accepted first
// when exemptDNS: the agent's DNS server answers there itself, and in the
// nat table ACCEPT also keeps Docker's DNAT rules off these packets.
// The jumps go first in PREROUTING and OUTPUT, so Docker's DOCKER chain
// (which matches local addresses) does not see these connections; a jump
// already there is not added again.
func hostAccessRestore(ip string, port int, exemptDNS bool, listing string) string {
	var b strings.Builder
	b.WriteString("*nat\n:" + hostAccessChain + " - [0:0]\n")
	if exemptDNS {
		for _, proto := range []string{"tcp", "udp"} {
			fmt.Fprintf(&b, "-A %s -d %s -p %s --dport 53 -j ACCEPT\n", hostAccessChain, ip, proto)
		}
	}
	fmt.Fprintf(&b, "-A %s -p tcp -d %s -j REDIRECT --to-ports %d\n", hostAccessChain, ip, port)
	have := map[string]bool{}
	for _, l := range strings.Split(listing, "\n") {
		have[strings.TrimSpace(l)] = true
	}
	for _, chain := range []string{"PREROUTING", "OUTPUT"} {
		if !have["-A "+chain+" -j "+hostAccessChain] {
			fmt.Fprintf(&b, "-I %s 1 -j %s\n", chain, hostAccessChain)
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// IP is the host access address of the last setup, "" before one.
func (s *HostAccess) IP() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ip
}

// Close stops the redirect target, if it runs.
func (s *HostAccess) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return nil
	}
	err := s.listener.Close()
	s.listener = nil
	return err
}

// hostAccessListener starts the redirect target once per agent process.
// It listens on all addresses because REDIRECT rewrites the destination to
// the primary address of the interface the packet came in on (docker0).
func (s *HostAccess) hostAccessListener() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener != nil {
		return s.listener.Addr().(*net.TCPAddr).Port, nil
	}
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return 0, fmt.Errorf("host access listener: %w", err)
	}
	s.listener = l
	port := l.Addr().(*net.TCPAddr).Port
	if s.HideOwnPort != nil {
		s.HideOwnPort("tcp", port)
	}
	go s.serveHostAccess(l)
	return port, nil
}

func (s *HostAccess) serveHostAccess(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go s.hostDial(c)
	}
}

func (s *HostAccess) hostDial(c net.Conn) {
	port, err := originalPort(c.(*net.TCPConn))
	if err != nil {
		s.Logger().Warn("host access: original destination", "err", err)
		c.Close()
		return
	}
	st, err := s.OpenToHost(agent.Request{Op: agent.OpHostDial, Network: "tcp", Port: port})
	if err != nil {
		s.Logger().Info("host access refused", "port", port, "err", err)
		c.Close()
		return
	}
	connpipe.Pipe(c, connpipe.CloseIsCloseWrite(st))
}

// originalPort reads the port the client asked for before REDIRECT.
func originalPort(c *net.TCPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var port int
	var serr error
	err = rc.Control(func(fd uintptr) {
		// SO_ORIGINAL_DST returns a sockaddr_in; IPv6Mreq is a 20-byte
		// buffer of the right shape to receive it.
		mreq, err := unix.GetsockoptIPv6Mreq(int(fd), syscall.SOL_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = fmt.Errorf("SO_ORIGINAL_DST: %w", err)
			return
		}
		port = int(binary.BigEndian.Uint16(mreq.Multiaddr[2:4]))
	})
	if err != nil {
		return 0, err
	}
	return port, serr
}
