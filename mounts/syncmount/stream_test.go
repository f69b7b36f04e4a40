package syncmount

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

func yamuxPair(t *testing.T) (client, server *yamux.Session) {
	a, b := net.Pipe()
	var err error
	if client, err = yamux.Client(a, nil); err != nil {
		t.Fatal(err)
	}
	if server, err = yamux.Server(b, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// readAfterClose closes c while a Read is blocked on it and reports whether
// the Read returned within d.
func readAfterClose(t *testing.T, c net.Conn, d time.Duration) bool {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the Read block
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func TestYamuxCloseNeedsWrapper(t *testing.T) {
	client, server := yamuxPair(t)
	go func() {
		// The peer accepts and then stays silent, like a busy guest.
		for {
			if _, err := server.Accept(); err != nil {
				return
			}
		}
	}()
	raw, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if readAfterClose(t, raw, 300*time.Millisecond) {
		t.Fatal("a bare yamux Close unblocked Read; the wrapper may be unnecessary now")
	}
	wrapped, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if !readAfterClose(t, wrapConn(wrapped), 2*time.Second) {
		t.Fatal("Read still blocked after the wrapped stream was closed")
	}
	w := wrapConn(wrapped)
	if _, err := w.Write([]byte("x")); err == nil {
		t.Error("Write after Close succeeded")
	}
}

func TestWrapConnNetPipe(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	w := wrapConn(a)
	if wrapConn(w) != w {
		t.Error("wrapConn wrapped twice")
	}
	if !readAfterClose(t, w, time.Second) {
		t.Fatal("net.Pipe Read still blocked after Close")
	}
	if err := w.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}
