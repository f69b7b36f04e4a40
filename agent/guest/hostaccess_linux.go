package guest

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/internal/connpipe"
)

const hostAccessChain = "VMDOCK-HOST"

// setupHostAccess makes ip (and host.docker.internal) reach the host's
// loopback: ip lives on lo, iptables redirects tcp to it onto the agent's
// listener, and each connection becomes a host-dial stream.
func (s *Server) setupHostAccess(ctx context.Context, ipStr string) error {
	ip := net.ParseIP(ipStr)
	if ip == nil || ip.To4() == nil {
		return fmt.Errorf("host access IP %q is not an IPv4 address", ipStr)
	}
	port, err := s.hostAccessListener()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.hostAccessIP = ipStr
	s.mu.Unlock()
	if _, err := s.OS.Run(ctx, "ip", "addr", "replace", ipStr+"/32", "dev", "lo"); err != nil {
		return err
	}
	// Our own chain, flushed and refilled, keeps this idempotent; the jumps
	// go first so Docker's DOCKER chain (which matches local addresses)
	// does not see these connections.
	_, _ = s.OS.Run(ctx, "iptables", "-t", "nat", "-N", hostAccessChain)
	cmds := [][]string{
		{"-t", "nat", "-F", hostAccessChain},
		{"-t", "nat", "-A", hostAccessChain, "-p", "tcp", "-d", ipStr, "-j", "REDIRECT", "--to-ports", strconv.Itoa(port)},
	}
	for _, c := range cmds {
		if _, err := s.OS.Run(ctx, "iptables", c...); err != nil {
			return err
		}
	}
	for _, chain := range []string{"PREROUTING", "OUTPUT"} {
		if _, err := s.OS.Run(ctx, "iptables", "-t", "nat", "-C", chain, "-j", hostAccessChain); err == nil {
			continue
		}
		if _, err := s.OS.Run(ctx, "iptables", "-t", "nat", "-I", chain, "1", "-j", hostAccessChain); err != nil {
			return err
		}
	}
	return s.editHosts(ipStr, ipStr+"\thost.docker.internal")
}

// hostAccessListener starts the redirect target once per agent process.
// It listens on all addresses because REDIRECT rewrites the destination to
// the primary address of the interface the packet came in on (docker0).
func (s *Server) hostAccessListener() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hostAccess != nil {
		return s.hostAccess.Addr().(*net.TCPAddr).Port, nil
	}
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return 0, fmt.Errorf("host access listener: %w", err)
	}
	s.hostAccess = l
	port := l.Addr().(*net.TCPAddr).Port
	if s.ownPorts == nil {
		s.ownPorts = map[portKey]bool{}
	}
	s.ownPorts[portKey{Proto: "tcp", Port: port}] = true
	go s.serveHostAccess(l)
	return port, nil
}

func (s *Server) serveHostAccess(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go s.hostDial(c)
	}
}

func (s *Server) hostDial(c net.Conn) {
	port, err := originalPort(c.(*net.TCPConn))
	if err != nil {
		s.log().Warn("host access: original destination", "err", err)
		c.Close()
		return
	}
	st, err := s.openToHost(agent.Request{Op: agent.OpHostDial, Network: "tcp", Port: port})
	if err != nil {
		s.log().Info("host access refused", "port", port, "err", err)
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
