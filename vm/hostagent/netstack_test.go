package hostagent

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/vmdock/vmdock/network/usernet"
	"github.com/vmdock/vmdock/vm/driver"
)

// namedDriver is a driver only by name: withNetStack picks the socket
// type from it.
type namedDriver struct{ driver.Driver }

type qemuNamed struct{ namedDriver }

func (qemuNamed) Name() string { return driver.TypeQEMU }

type vzNamed struct{ namedDriver }

func (vzNamed) Name() string { return driver.TypeVZ }

// arpRequest asks who has the gateway, from the guest's MAC and address.
func arpRequest() []byte {
	mac, _ := net.ParseMAC(usernet.GuestMAC)
	f := append(bytes.Repeat([]byte{0xff}, 6), mac...)
	f = append(f, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1)
	f = append(f, mac...)
	f = append(f, net.ParseIP(usernet.GuestIP).To4()...)
	f = append(f, make([]byte, 6)...)
	return append(f, net.ParseIP(usernet.GatewayIP).To4()...)
}

// isGatewayARPReply: an ARP reply (op 2) from the stack's fixed MAC.
func isGatewayARPReply(f []byte) bool {
	gw, _ := net.ParseMAC(usernet.GatewayMAC)
	return len(f) >= 42 && f[12] == 0x08 && f[13] == 0x06 && f[21] == 2 && bytes.Equal(f[22:28], gw)
}

// The VM's end of the stack's socket speaks each hypervisor's framing: a
// length-prefixed stream for qemu, a datagram per frame for vz. An ARP
// request written as the NIC would gets the gateway's answer, after a runt
// frame that status counts as dropped, beside the relays' caps.
func TestNetStackServesTheVMEnd(t *testing.T) {
	for _, tc := range []struct {
		drv      driver.Driver
		sockType int
	}{{qemuNamed{}, syscall.SOCK_STREAM}, {vzNamed{}, syscall.SOCK_DGRAM}} {
		t.Run(tc.drv.Name(), func(t *testing.T) {
			ha := &hostAgent{boot: bootResults{driver: tc.drv}}
			plan, err := ha.withNetStack(driver.NewPlan(driver.Spec{NetStack: driver.NetStackGvisor, Network: driver.NetworkIsolated}, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer ha.closeNetStack()
			f := plan.Spec().NetFile
			if f == nil {
				t.Fatal("no socket for the VM")
			}
			if typ, err := syscall.GetsockoptInt(int(f.Fd()), syscall.SOL_SOCKET, syscall.SO_TYPE); err != nil || typ != tc.sockType {
				t.Fatalf("socket type %d, %v; want %d", typ, err, tc.sockType)
			}
			vm, err := net.FileConn(f)
			if err != nil {
				t.Fatal(err)
			}
			defer vm.Close()
			vm.SetDeadline(time.Now().Add(5 * time.Second))
			runt := []byte{1, 2, 3, 4, 5}
			if tc.sockType == syscall.SOCK_STREAM {
				runt = append(binary.BigEndian.AppendUint32(nil, uint32(len(runt))), runt...)
			}
			if _, err := vm.Write(runt); err != nil {
				t.Fatal(err)
			}
			reply := exchangeFrame(t, vm, tc.sockType == syscall.SOCK_STREAM, arpRequest())
			if !isGatewayARPReply(reply) {
				t.Fatalf("answer % x, want an ARP reply from %s", reply, usernet.GatewayMAC)
			}
			r := ha.netStackRelays()
			if r == nil || r.Dropped.MalformedFrames != 1 || r.Caps["udpFlows"] != usernet.DefaultLimits.UDPFlows || r.Caps["tcp"] != usernet.DefaultLimits.TCPRelays {
				t.Errorf("status relays %+v, want the runt counted and the default caps", r)
			}
			if d := ha.netStackDirect(); d == nil {
				t.Error("no direct path through the stack")
			} else if a, err := d.OpenPort(context.Background(), 80); err != nil || a != usernet.GuestIP+":80" {
				t.Errorf("direct path opens %q, %v", a, err)
			}
		})
	}
}

func exchangeFrame(t *testing.T, c net.Conn, framed bool, frame []byte) []byte {
	t.Helper()
	if !framed {
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2048)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return buf[:n]
	}
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A spec on the driver's own network gets no stack and no socket.
func TestNetStackOnlyForGvisor(t *testing.T) {
	ha := &hostAgent{boot: bootResults{driver: qemuNamed{}}}
	plan, err := ha.withNetStack(driver.NewPlan(driver.Spec{NetStack: driver.NetStackSlirp}, nil))
	if err != nil || plan.Spec().NetFile != nil || ha.run.net != nil {
		t.Fatalf("slirp plan got a stack: %v, %v", plan.Spec().NetFile, err)
	}
	if d := ha.netStackDirect(); d != nil {
		t.Fatalf("direct path %v without a stack", d)
	}
}
