package agent

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// fakeWatchGuest answers one watch-ports stream with the given handler.
func fakeWatchGuest(t *testing.T, serve func(st net.Conn)) *Client {
	return fakeGuest(t, OpWatchPorts, serve)
}

// guestSession is the guest side of a session on guest: the handshake,
// then yamux as server.
func guestSession(guest net.Conn) (*yamux.Session, error) {
	if err := GuestHello(guest); err != nil {
		return nil, err
	}
	return yamux.Server(guest, YamuxConfig(slog.Default()))
}

// fakeGuest plays a guest agent that accepts one stream, checks it asks
// for op, replies ok and hands the stream to serve.
func fakeGuest(t *testing.T, op string, serve func(st net.Conn)) *Client {
	t.Helper()
	host, guest := net.Pipe()
	go func() {
		defer guest.Close()
		sess, err := guestSession(guest)
		if err != nil {
			return
		}
		defer sess.Close()
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		var req Request
		if err := ReadJSONLine(st, &req); err != nil || req.Op != op {
			t.Errorf("request %+v, %v", req, err)
			return
		}
		Reply(st, nil)
		serve(st)
		<-sess.CloseChan()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A guest that sends a port event without end must not make the host
// buffer it: the watch ends after maxPortEventLine bytes.
func TestWatchPortsCapsALine(t *testing.T) {
	var sent atomic.Int64
	c := fakeWatchGuest(t, func(st net.Conn) {
		WriteJSONLine(st, PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: 80})
		WriteJSONLine(st, PortEvent{Synced: true})
		st.Write([]byte(`{"added":true,"proto":"`))
		chunk := bytes.Repeat([]byte("x"), 4096)
		for range 64 << 20 / len(chunk) {
			// Writes stop succeeding once the host stops reading and the
			// stream's window is full.
			st.SetWriteDeadline(time.Now().Add(3 * time.Second))
			n, err := st.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch, err := c.WatchPorts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []PortEvent
	for ev := range ch {
		got = append(got, ev)
	}
	if ctx.Err() != nil {
		t.Fatal("the watch did not end on an endless line")
	}
	want := []PortEvent{{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: 80}, {Synced: true}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	// The host read at most the cap plus what yamux lets the guest send
	// ahead of the reader (one receive window).
	time.Sleep(100 * time.Millisecond)
	if n := sent.Load(); n > maxPortEventLine+2<<20 {
		t.Fatalf("the guest got %d bytes of one event through", n)
	}
}

// A line that is not a PortEvent ends the watch instead of being skipped
// or misread.
func TestWatchPortsEndsOnGarbage(t *testing.T) {
	c := fakeWatchGuest(t, func(st net.Conn) {
		st.Write([]byte("not json\n"))
		WriteJSONLine(st, PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: 81})
		io.Copy(io.Discard, st)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, err := c.WatchPorts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for ev := range ch {
		t.Fatalf("event %+v after garbage", ev)
	}
	if ctx.Err() != nil {
		t.Fatal("the watch did not end on garbage")
	}
}

// The host's handshake finds its echo behind stray bytes of an earlier
// session on the same line, as a reconnect over virtio-serial may see.
func TestHostHelloSkipsAPartialFrameBeforeTheEcho(t *testing.T) {
	host, guest := bufferedPair(t)
	defer host.Close()
	defer guest.Close()
	errc := make(chan error, 1)
	go func() {
		var req []byte
		b := make([]byte, 1)
		for len(req) == 0 || req[len(req)-1] != '\n' {
			if _, err := guest.Read(b); err != nil {
				errc <- err
				return
			}
			req = append(req, b[0])
		}
		guest.Write([]byte("\x00\x02\x00\x01\x00\x00"))
		guest.Write(req) // the echo, on the same line as the junk
		errc <- nil
	}()
	if err := HostHello(host, "n2"); err != nil {
		t.Fatalf("HostHello: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// A host whose hello the previous agent's session swallowed hears the new
// agent's announcement and says hello again, instead of waiting for an
// echo that never comes.
func TestHostHelloSaysHelloAgainAfterARestart(t *testing.T) {
	host, guest := bufferedPair(t)
	defer host.Close()
	defer guest.Close()
	errc := make(chan error, 1)
	go func() {
		if _, err := readLine(guest); err != nil { // the old session eats it
			errc <- err
			return
		}
		io.WriteString(guest, RestartLine+"\n")
		errc <- GuestHello(guest)
	}()
	done := make(chan error, 1)
	go func() { done <- HostHello(host, "first") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("HostHello: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("HostHello waits for an echo of the swallowed hello")
	}
	if err := <-errc; err != nil {
		t.Fatalf("GuestHello: %v", err)
	}
	// Both sides agree: a byte one side writes next is the other's next.
	go host.Write([]byte("y"))
	b := make([]byte, 1)
	if _, err := io.ReadFull(guest, b); err != nil || b[0] != 'y' {
		t.Fatalf("after the handshake the guest read %q, %v", b, err)
	}
}

// When the guest reads both hellos it echoes both; the host confirms only
// the second, so nothing stray follows its GO.
func TestHostHelloAfterARestartWithBothHellosRead(t *testing.T) {
	host, guest := bufferedPair(t)
	defer host.Close()
	defer guest.Close()
	errc := make(chan error, 1)
	go func() {
		io.WriteString(guest, RestartLine+"\n")
		time.Sleep(100 * time.Millisecond) // let the second hello arrive too
		errc <- GuestHello(guest)
	}()
	if err := HostHello(host, "first"); err != nil {
		t.Fatalf("HostHello: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("GuestHello: %v", err)
	}
	go guest.Write([]byte("z"))
	b := make([]byte, 1)
	host.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(host, b); err != nil || b[0] != 'z' {
		t.Fatalf("after the handshake the host read %q, %v; want the guest's next byte, not a stray echo", b, err)
	}
}
