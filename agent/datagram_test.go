package agent

import (
	"io"
	"net"
	"testing"
)

func TestDatagramConnShortBuffer(t *testing.T) {
	a, b := net.Pipe()
	da, db := NewDatagramConn(a), NewDatagramConn(b)
	go func() {
		for _, m := range []string{"a long datagram", "next"} {
			if _, err := da.Write([]byte(m)); err != nil {
				t.Error(err)
			}
		}
	}()
	buf := make([]byte, 6)
	n, err := db.Read(buf)
	if n != 6 || err != io.ErrShortBuffer || string(buf[:n]) != "a long" {
		t.Fatalf("short read = %q, %v; want %q, io.ErrShortBuffer", buf[:n], err, "a long")
	}
	n, err = db.Read(buf)
	if err != nil || string(buf[:n]) != "next" {
		t.Fatalf("next datagram = %q, %v; want %q", buf[:n], err, "next")
	}
}
