package usernet

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

// guestClient is a userspace guest: a gVisor netstack with the guest's MAC
// and address, plugged into the stack's QEMU transport over a real unix
// socketpair, as QEMU's -netdev stream would be.
func guestClient(t *testing.T, s *Stack) *stack.Stack {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	hostConn := fileConn(t, fds[0])
	guestConn := fileConn(t, fds[1])
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = s.ServeQEMU(ctx, hostConn) }()

	mac, _ := net.ParseMAC(GuestMAC)
	ch := channel.New(256, mtu, tcpip.LinkAddress(mac))
	st := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	if err := st.CreateNIC(1, ethernet.New(ch)); err != nil {
		t.Fatal(err)
	}
	addr := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: tcpip.AddressWithPrefix{Address: addr4(net.ParseIP(GuestIP)), PrefixLen: 24}}
	if err := st.AddProtocolAddress(1, addr, stack.AddressProperties{}); err != nil {
		t.Fatal(err)
	}
	st.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, Gateway: addr4(net.ParseIP(GatewayIP)), NIC: 1}})
	t.Cleanup(func() { guestConn.Close(); st.Close() })
	go clientTx(ctx, ch, guestConn)
	go clientRx(ch, guestConn)
	return st
}

func fileConn(t *testing.T, fd int) net.Conn {
	t.Helper()
	f := os.NewFile(uintptr(fd), "socketpair")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clientTx frames the client's outgoing frames as QEMU does: a 4-byte
// big-endian length, then the Ethernet frame.
func clientTx(ctx context.Context, ch *channel.Endpoint, conn net.Conn) {
	for {
		pkt := ch.ReadContext(ctx)
		if pkt == nil {
			return
		}
		frame := pkt.ToView().AsSlice()
		msg := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
		_, err := conn.Write(append(msg, frame...))
		pkt.DecRef()
		if err != nil {
			return
		}
	}
}

func clientRx(ch *channel.Endpoint, conn net.Conn) {
	var size [4]byte
	for {
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, frame); err != nil {
			return
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
		ch.InjectInbound(0, pkt)
		pkt.DecRef()
	}
}
