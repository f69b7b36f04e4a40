package usernet

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Frames shorter than an Ethernet header, as a broken or hostile guest
// sends them, are dropped before gvisor-tap-vsock's switch: 5 bytes froze
// the switch under its lock (nothing answered again) and 13 bytes to the
// broadcast address ended the process. After each, on both framings, the
// stack still answers the guest's ARP, and the drop is logged once.
func TestRuntFramesAreDroppedBeforeTheSwitch(t *testing.T) {
	broadcast13 := append(bytes.Repeat([]byte{0xff}, 6), 0x52, 0x54, 0, 0x12, 0x34, 0x56, 0x08)
	runts := map[string][][]byte{
		"5 bytes":               {{1, 2, 3, 4, 5}},
		"13 bytes to broadcast": {broadcast13},
		"empty and oversized":   {{}, make([]byte, maxFrameSize+1)},
	}
	for _, framing := range []struct {
		name     string
		sockType int
	}{{"qemu", syscall.SOCK_STREAM}, {"vfkit", syscall.SOCK_DGRAM}} {
		for name, frames := range runts {
			if framing.sockType == syscall.SOCK_DGRAM && name == "empty and oversized" {
				frames = frames[:1] // a datagram the size of the other is not sent on a unix socket pair
			}
			t.Run(framing.name+"/"+name, func(t *testing.T) {
				var log lockedBuffer
				s := newStack(t, Config{Isolated: true, Log: slog.New(slog.NewTextHandler(&log, nil))})
				vm := rawNIC(t, s, framing.sockType)
				for _, f := range frames {
					writeFrame(t, vm, framing.sockType == syscall.SOCK_STREAM, f)
				}
				writeFrame(t, vm, framing.sockType == syscall.SOCK_STREAM, guestARPRequest())
				if reply := readGatewayARPReply(t, vm, framing.sockType == syscall.SOCK_STREAM); reply == nil {
					t.Fatal("no ARP reply after the malformed frames")
				}
				if n := strings.Count(log.String(), "dropped a malformed frame"); n != 1 {
					t.Errorf("the drop logged %d times, want once:\n%s", n, log.String())
				}
			})
		}
	}
}

// A panic where the stack handles the NIC's frames ends that NIC only: it
// is logged with its stack and returned as the NIC's error, and the host
// agent goes on.
func TestPanicInTheNICIsRecovered(t *testing.T) {
	var log lockedBuffer
	s := newStack(t, Config{Isolated: true, Log: slog.New(slog.NewTextHandler(&log, nil))})
	err := s.ServeQEMU(context.Background(), panickingConn{})
	if err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("serving a NIC whose socket panics: %v, want the panic as the error", err)
	}
	if !strings.Contains(log.String(), "panicked; recovered") || !strings.Contains(log.String(), "goroutine") {
		t.Errorf("the panic is not logged with its stack:\n%s", log.String())
	}
}

// panickingConn is a socket whose read panics, standing in for a fault
// anywhere on the switch's receive path.
type panickingConn struct{ net.Conn }

func (panickingConn) Read([]byte) (int, error)        { panic("read exploded") }
func (panickingConn) Close() error                    { return nil }
func (panickingConn) RemoteAddr() net.Addr            { return &net.UnixAddr{Name: "vm", Net: "unix"} }
func (panickingConn) LocalAddr() net.Addr             { return &net.UnixAddr{Name: "stack", Net: "unix"} }
func (panickingConn) SetDeadline(time.Time) error     { return nil }
func (panickingConn) Write(b []byte) (int, error)     { return len(b), nil }
func (panickingConn) SetReadDeadline(time.Time) error { return nil }

// rawNIC serves s on one end of a socket pair of sockType and returns the
// VM's end, where the test writes frames as a NIC would.
func rawNIC(t *testing.T, s *Stack, sockType int) net.Conn {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, sockType, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, vm := fileConn(t, fds[0]), fileConn(t, fds[1])
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		if sockType == syscall.SOCK_STREAM {
			_ = s.ServeQEMU(ctx, host)
		} else {
			_ = s.ServeVfkit(ctx, host)
		}
	}()
	t.Cleanup(func() {
		cancel()
		vm.Close()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Error("the NIC did not stop within 10 s of its socket closing: the switch is stuck")
		}
	})
	return vm
}

func writeFrame(t *testing.T, c net.Conn, stream bool, frame []byte) {
	t.Helper()
	msg := frame
	if stream {
		msg = append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
	}
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
}

// readGatewayARPReply reads frames for up to 10 s until the gateway's ARP
// reply; nil if none came.
func readGatewayARPReply(t *testing.T, c net.Conn, stream bool) []byte {
	t.Helper()
	gw, _ := net.ParseMAC(GatewayMAC)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		var f []byte
		if stream {
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				return nil
			}
			f = make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(c, f); err != nil {
				return nil
			}
		} else {
			buf := make([]byte, 65536)
			n, err := c.Read(buf)
			if err != nil {
				return nil
			}
			f = buf[:n]
		}
		if len(f) >= 42 && f[12] == 0x08 && f[13] == 0x06 && f[21] == 2 && bytes.Equal(f[22:28], gw) {
			return f
		}
	}
}

// guestARPRequest asks who has the gateway, from the guest's MAC and
// address.
func guestARPRequest() []byte {
	mac, _ := net.ParseMAC(GuestMAC)
	f := append(bytes.Repeat([]byte{0xff}, 6), mac...)
	f = append(f, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1)
	f = append(f, mac...)
	f = append(f, net.ParseIP(GuestIP).To4()...)
	f = append(f, make([]byte, 6)...)
	return append(f, net.ParseIP(GatewayIP).To4()...)
}

// lockedBuffer is a log sink the stack's goroutines write while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
