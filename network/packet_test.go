package network

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestPacketFraming(t *testing.T) {
	big := bytes.Repeat([]byte{7}, MaxPacket)
	tests := []struct {
		name    string
		packet  []byte
		bufSize int
		wantN   int
		wantErr error
	}{
		{"empty datagram", []byte{}, 100, 0, nil},
		{"small", []byte("hello"), 100, 5, nil},
		{"max size", big, MaxPacket, MaxPacket, nil},
		{"truncated", []byte("hello world"), 5, 5, io.ErrShortBuffer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stream bytes.Buffer
			if err := WritePacket(&stream, tt.packet); err != nil {
				t.Fatal(err)
			}
			if err := WritePacket(&stream, []byte("next")); err != nil {
				t.Fatal(err)
			}
			if stream.Len() != 2+len(tt.packet)+2+4 {
				t.Fatalf("stream length %d, want %d", stream.Len(), 2+len(tt.packet)+6)
			}
			buf := make([]byte, tt.bufSize)
			n, err := ReadPacket(&stream, buf)
			if n != tt.wantN || !errors.Is(err, tt.wantErr) && err != tt.wantErr {
				t.Fatalf("ReadPacket = %d, %v; want %d, %v", n, err, tt.wantN, tt.wantErr)
			}
			if !bytes.Equal(buf[:n], tt.packet[:n]) {
				t.Fatalf("payload differs")
			}
			// The stream stays aligned on frames even after a truncation.
			n, err = ReadPacket(&stream, make([]byte, 100))
			if err != nil || n != 4 {
				t.Fatalf("following frame: %d, %v", n, err)
			}
			if _, err := ReadPacket(&stream, buf); err != io.EOF {
				t.Fatalf("end of stream: %v, want io.EOF", err)
			}
		})
	}
}

func TestPacketErrors(t *testing.T) {
	if err := WritePacket(io.Discard, make([]byte, MaxPacket+1)); !errors.Is(err, ErrPacketTooLarge) {
		t.Errorf("oversized write: %v", err)
	}
	tests := []struct {
		name   string
		stream []byte
	}{
		{"half a header", []byte{0}},
		{"short payload", []byte{0, 5, 'a', 'b'}},
	}
	for _, tt := range tests {
		_, err := ReadPacket(bytes.NewReader(tt.stream), make([]byte, 10))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: %v, want io.ErrUnexpectedEOF", tt.name, err)
		}
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
