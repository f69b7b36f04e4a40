package connpipe

import (
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair returns both ends of one loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestPipePassesHalfClose: a client that sends, shuts down writing and then
// reads still gets the reply through the pipe.
func TestPipePassesHalfClose(t *testing.T) {
	client, front := tcpPair(t)
	back, echo := tcpPair(t)
	done := make(chan struct{})
	go func() { Pipe(front, back); close(done) }()
	go func() {
		b, _ := io.ReadAll(echo) // ends only when the client's half-close came through
		echo.Write(append([]byte("re: "), b...))
		echo.Close()
	}()
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if err := client.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "re: ping" {
		t.Fatalf("reply %q, want %q", got, "re: ping")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Pipe did not return after both directions ended")
	}
}

func TestCloseIsCloseWrite(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	c := CloseIsCloseWrite(a)
	cw, ok := c.(CloseWriter)
	if !ok {
		t.Fatalf("%T has no CloseWrite", c)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// net.Pipe has no half-close: its Close is what CloseWrite did.
	if _, err := a.Write([]byte("x")); err == nil {
		t.Fatal("CloseWrite did not close the conn")
	}
}
