package agent

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestDialPassesHalfCloseToTheGuest plays a guest whose dialled service
// echoes until its input ends (as TCP echo servers and `nc -N` peers do):
// the host must be able to end its input and still read the whole reply.
func TestDialPassesHalfCloseToTheGuest(t *testing.T) {
	c := fakeGuest(t, OpDial, func(st net.Conn) {
		io.Copy(st, st) // returns only when the host's input ends
		st.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := c.Dial(ctx, "tcp", "127.0.0.1:82")
	if err != nil {
		t.Fatal(err)
	}
	cw, ok := conn.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("Dial returned %T without CloseWrite", conn)
	}
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "ping" {
		t.Fatalf("reply %q, %v; want the echo and EOF", got, err)
	}
}
