package guest

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vmdock/vmdock/agent"
)

type portKey struct {
	Proto string
	IP    string
	Port  int
}

// Socket states in /proc/net: TCP_LISTEN, and TCP_CLOSE which an unconnected
// (bound) udp socket reports.
const (
	stateListen = "0A"
	stateClose  = "07"
)

// parseProcNet reads one /proc/net/{tcp,tcp6,udp,udp6} table and returns the
// forwardable sockets: listening tcp, bound udp, on the any or loopback
// address.
var localhost4 = netip.AddrFrom4([4]byte{127, 0, 0, 1})

func parseProcNet(r io.Reader, proto string) ([]portKey, error) {
	var out []portKey
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first { // header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		local, remote, st := f[1], f[2], f[3]
		if proto == "tcp" && st != stateListen {
			continue
		}
		if proto == "udp" && (st != stateClose || !strings.HasSuffix(remote, ":0000")) {
			continue
		}
		ip, port, err := parseHexAddr(local)
		if err != nil {
			return nil, fmt.Errorf("parse %s address %q: %w", proto, local, err)
		}
		// Only what a user means to publish: all addresses, or exactly
		// localhost. 127.0.0.53 (systemd-resolved's stub) and other
		// loopback aliases are the guest's private business, and forwarding
		// them would take ports like 53 on the host.
		if port == 0 || !(ip.IsUnspecified() || ip == localhost4 || ip == netip.IPv6Loopback()) {
			continue
		}
		out = append(out, portKey{Proto: proto, IP: ip.String(), Port: port})
	}
	return out, sc.Err()
}

// parseHexAddr decodes "0100007F:1F90": the address is printed as 32-bit
// words in the kernel's (little-endian on amd64 and arm64) byte order, the
// port as a plain hex number.
func parseHexAddr(s string) (netip.Addr, int, error) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.Addr{}, 0, fmt.Errorf("no port")
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.Addr{}, 0, err
	}
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return netip.Addr{}, 0, fmt.Errorf("bad address %q", h)
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	a, _ := netip.AddrFromSlice(b)
	return a.Unmap(), int(port), nil
}

func (s *Server) scanPorts() (map[portKey]bool, error) {
	dir := s.ProcNet
	if dir == "" {
		dir = "/proc/net"
	}
	set := map[portKey]bool{}
	s.mu.Lock()
	own := make(map[portKey]bool, len(s.ownPorts))
	for k := range s.ownPorts {
		own[k] = true
	}
	s.mu.Unlock()
	for _, f := range []struct{ file, proto string }{{"tcp", "tcp"}, {"tcp6", "tcp"}, {"udp", "udp"}, {"udp6", "udp"}} {
		fh, err := os.Open(filepath.Join(dir, f.file))
		if os.IsNotExist(err) {
			continue // no IPv6 in this kernel
		}
		if err != nil {
			return nil, err
		}
		keys, err := parseProcNet(fh, f.proto)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.file, err)
		}
		for _, k := range keys {
			if !own[portKey{Proto: k.Proto, Port: k.Port}] {
				set[k] = true
			}
		}
	}
	return set, nil
}

// addOwnPort hides the agent's own listener from the port watch: forwarding
// it to the host would loop.
func (s *Server) addOwnPort(proto string, port int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ownPorts == nil {
		s.ownPorts = map[portKey]bool{}
	}
	s.ownPorts[portKey{Proto: proto, Port: port}] = true
}

// diffPorts returns the events that turn old into cur, sorted for stable
// output.
func diffPorts(old, cur map[portKey]bool) []agent.PortEvent {
	var ev []agent.PortEvent
	for k := range cur {
		if !old[k] {
			ev = append(ev, agent.PortEvent{Added: true, Proto: k.Proto, IP: k.IP, Port: k.Port})
		}
	}
	for k := range old {
		if !cur[k] {
			ev = append(ev, agent.PortEvent{Proto: k.Proto, IP: k.IP, Port: k.Port})
		}
	}
	sort.Slice(ev, func(i, j int) bool {
		a, b := ev[i], ev[j]
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		if a.Proto != b.Proto {
			return a.Proto < b.Proto
		}
		return a.IP < b.IP
	})
	return ev
}

func (s *Server) watchPorts(ctx context.Context, st net.Conn) {
	defer st.Close()
	if err := agent.Reply(st, nil); err != nil {
		return
	}
	// The host closing the stream is the only way a watch ends.
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, st)
		close(gone)
	}()
	every := s.PortPoll
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	old := map[portKey]bool{}
	for {
		cur, err := s.scanPorts()
		if err != nil {
			s.log().Warn("scan listening ports", "err", err)
		} else {
			for _, ev := range diffPorts(old, cur) {
				if err := agent.WriteJSONLine(st, ev); err != nil {
					return
				}
			}
			old = cur
		}
		select {
		case <-t.C:
		case <-gone:
			return
		case <-ctx.Done():
			return
		}
	}
}
