package portlist

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// SockDiag lists forwardable sockets with NETLINK_SOCK_DIAG dumps (one per
// family and protocol), asking the kernel for listening TCP and closed
// (bound, unconnected) UDP sockets only. Errors from a kernel without the
// inet_diag modules wrap ErrNoSockDiag.
func SockDiag() ([]Port, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("%w: netlink socket: %v", ErrNoSockDiag, err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("bind netlink socket: %w", err)
	}
	var out []Port
	// The watch lists four times a second; a fresh 32 KiB buffer each
	// time would be most of what the guest agent allocates when idle.
	bufp := recvBufs.Get().(*[]byte)
	defer recvBufs.Put(bufp)
	buf := *bufp
	seq := uint32(0)
	for _, q := range []struct {
		proto  string
		ipProt uint8
		states uint32
	}{{"tcp", unix.IPPROTO_TCP, 1 << stateListen}, {"udp", unix.IPPROTO_UDP, 1 << stateClose}} {
		for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
			seq++
			ps, err := dump(fd, buf, seq, family, q.ipProt, q.states, q.proto)
			if err != nil {
				return nil, err
			}
			out = append(out, ps...)
		}
	}
	sortPorts(out)
	return out, nil
}

var recvBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// Sizes of the kernel's structs (include/uapi/linux/inet_diag.h).
const (
	sizeofNlMsghdr    = 16
	sizeofInetDiagReq = 56 // inet_diag_req_v2
	sizeofInetDiagMsg = 72 // inet_diag_msg
)

func dump(fd int, buf []byte, seq uint32, family, proto uint8, states uint32, protoName string) ([]Port, error) {
	req := make([]byte, sizeofNlMsghdr+sizeofInetDiagReq)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], seq)
	r := req[sizeofNlMsghdr:]
	r[0], r[1] = family, proto
	ne.PutUint32(r[4:], states)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag request: %w", err)
	}
	var out []Port
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sock_diag reply: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("sock_diag reply: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				errno := unix.Errno(0)
				if len(m.Data) >= 4 {
					errno = unix.Errno(-int32(ne.Uint32(m.Data)))
				}
				if errno == 0 {
					continue // an ack
				}
				return nil, fmt.Errorf("%w: %s family %d: %v", ErrNoSockDiag, protoName, family, errno)
			}
			if p, ok := parseDiagMsg(m.Data, protoName); ok {
				out = append(out, p)
			}
		}
	}
}

// parseDiagMsg decodes an inet_diag_msg: family and state, then the
// socket id whose ports and addresses are in network byte order.
func parseDiagMsg(b []byte, proto string) (Port, bool) {
	if len(b) < sizeofInetDiagMsg {
		return Port{}, false
	}
	if (proto == "tcp" && b[1] != stateListen) || (proto == "udp" && b[1] != stateClose) {
		return Port{}, false // the kernel filters by state already; belt and braces
	}
	id := b[4:]
	sport := int(binary.BigEndian.Uint16(id[0:]))
	dport := binary.BigEndian.Uint16(id[2:])
	var ip netip.Addr
	switch b[0] {
	case unix.AF_INET:
		ip = netip.AddrFrom4([4]byte(id[4:8]))
	case unix.AF_INET6:
		ip = netip.AddrFrom16([16]byte(id[4:20])).Unmap()
	default:
		return Port{}, false
	}
	if proto == "udp" && dport != 0 {
		return Port{}, false
	}
	if !forwardable(ip, sport) {
		return Port{}, false
	}
	return Port{Proto: proto, IP: ip, Port: sport}, true
}
