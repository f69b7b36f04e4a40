package agent

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
)

func TestHandshakeSkipsStaleBytes(t *testing.T) {
	tests := []struct{ name, stale string }{
		{"clean", ""},
		{"garbage lines", "junk\x00\x01\nmore junk\n"},
		{"partial line before hello", "\x00\x00half-written"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, guest := net.Pipe()
			defer host.Close()
			defer guest.Close()
			errc := make(chan error, 1)
			go func() {
				errc <- GuestHello(struct {
					io.Reader
					io.Writer
				}{io.MultiReader(strings.NewReader(tt.stale), guest), guest})
			}()
			if err := HostHello(host, "n1"); err != nil {
				t.Fatalf("HostHello: %v", err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("GuestHello: %v", err)
			}
		})
	}
}

func TestDatagramConnKeepsBoundaries(t *testing.T) {
	a, b := net.Pipe()
	da, db := NewDatagramConn(a), NewDatagramConn(b)
	msgs := [][]byte{[]byte("one"), {}, bytes.Repeat([]byte("x"), 9000)}
	go func() {
		for _, m := range msgs {
			if _, err := da.Write(m); err != nil {
				t.Error(err)
			}
		}
		da.Close()
	}()
	buf := make([]byte, MaxDatagram)
	for i, m := range msgs {
		n, err := db.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], m) {
			t.Fatalf("datagram %d: got %d bytes, %v; want %d bytes", i, n, err, len(m))
		}
	}
	if _, err := db.Read(buf); err == nil {
		t.Fatal("read after close: want an error")
	}
	if _, err := da.Write(make([]byte, MaxDatagram+1)); err == nil {
		t.Fatal("oversized datagram: want an error")
	}
}

func TestFramesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	fw := NewFrameWriter(&buf)
	big := bytes.Repeat([]byte("y"), maxFrame+10)
	if err := fw.WriteFrame(FrameResize, ResizePayload(40, 120)); err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Writer(FrameStdout).Write(big); err != nil {
		t.Fatal(err)
	}
	kind, p, err := ReadFrame(&buf)
	if err != nil || kind != FrameResize {
		t.Fatalf("frame 1: %d %v", kind, err)
	}
	if r, c, err := ParseResize(p); err != nil || r != 40 || c != 120 {
		t.Fatalf("resize = %d x %d, %v", r, c, err)
	}
	var got []byte
	for buf.Len() > 0 {
		kind, p, err := ReadFrame(&buf)
		if err != nil || kind != FrameStdout {
			t.Fatalf("stdout frame: %d %v", kind, err)
		}
		got = append(got, p...)
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("split payload: got %d bytes, want %d", len(got), len(big))
	}
	if _, _, err := ParseResize([]byte{1}); err == nil {
		t.Fatal("short resize payload: want an error")
	}
}

func TestGuestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg     GuestConfig
		wantErr string
	}{
		{GuestConfig{Channel: ChannelVirtioSerial}, ""},
		{GuestConfig{Channel: ChannelVsock, LogLevel: "debug"}, ""},
		{GuestConfig{Channel: "tcp"}, `channel "tcp"`},
		{GuestConfig{Channel: ChannelVsock, LogLevel: "loud"}, `log level "loud"`},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.cfg, err, tt.wantErr)
		}
	}
	c := GuestConfig{Channel: ChannelVsock}
	if c.Serial() != "/dev/virtio-ports/org.vmdock.agent" || c.Port() != 2222 {
		t.Errorf("defaults: %s %d", c.Serial(), c.Port())
	}
}

// A hello left in the channel by an earlier host attempt must not make the
// guest start a session the current host attempt does not know about.
func TestHandshakeSkipsStaleHelloFromEarlierAttempt(t *testing.T) {
	host, guest := bufferedPair(t) // virtio-serial buffers; net.Pipe would deadlock
	defer host.Close()
	defer guest.Close()
	stale := io.MultiReader(strings.NewReader(HelloLine+" old-attempt\n"), guest)
	errc := make(chan error, 1)
	go func() {
		errc <- GuestHello(struct {
			io.Reader
			io.Writer
		}{stale, guest})
	}()
	if err := HostHello(host, "new-attempt"); err != nil {
		t.Fatalf("HostHello: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("GuestHello: %v", err)
	}
	// Both sides are now past the handshake on the same attempt: a byte
	// written by one arrives first at the other.
	go host.Write([]byte("x"))
	b := make([]byte, 1)
	if _, err := io.ReadFull(guest, b); err != nil || b[0] != 'x' {
		t.Fatalf("after handshake guest read %q, %v", b, err)
	}
}

// bufferedPair is a connected pair with kernel buffers, like a real channel.
func bufferedPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}
