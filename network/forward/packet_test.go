package forward

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent/lenprefix"
)

// The framing itself is tested in package lenprefix; this checks that
// PacketStream keeps its rules: a short buffer is reported and the stream
// stays in sync, an oversized datagram is refused.
func TestPacketStreamShortBufferAndLimit(t *testing.T) {
	host, guest := net.Pipe()
	hs, gs := NewPacketStream(host), NewPacketStream(guest)
	defer hs.Close()
	defer gs.Close()
	host.SetDeadline(time.Now().Add(5 * time.Second))
	guest.SetDeadline(time.Now().Add(5 * time.Second))
	go func() {
		for _, m := range []string{"hello world", "next"} {
			if err := gs.WritePacket([]byte(m)); err != nil {
				t.Error(err)
			}
		}
	}()
	buf := make([]byte, 5)
	n, err := hs.ReadPacket(buf)
	if n != 5 || err != io.ErrShortBuffer || string(buf) != "hello" {
		t.Fatalf("short read = %q, %v; want %q, io.ErrShortBuffer", buf[:n], err, "hello")
	}
	n, err = hs.ReadPacket(buf)
	if err != nil || string(buf[:n]) != "next" {
		t.Fatalf("next datagram = %q, %v", buf[:n], err)
	}
	if err := hs.WritePacket(make([]byte, MaxPacket+1)); !errors.Is(err, lenprefix.ErrTooLarge) {
		t.Errorf("oversized datagram: %v, want lenprefix.ErrTooLarge", err)
	}
}

func TestRelayDatagrams(t *testing.T) {
	srv := echoUDPServer(t)
	u, err := net.Dial("udp", srv.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	host, guest := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- RelayDatagrams(guest, u) }()
	ps := NewPacketStream(host)
	host.SetDeadline(time.Now().Add(5 * time.Second))
	for _, msg := range []string{"a", "", "ccc"} {
		if err := ps.WritePacket([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		n, err := ps.ReadPacket(buf)
		if err != nil || string(buf[:n]) != "echo:"+msg {
			t.Fatalf("reply %q, %v; want %q", buf[:n], err, "echo:"+msg)
		}
	}
	ps.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("relay ended with %v after the stream closed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("relay did not end when the stream closed")
	}
}
