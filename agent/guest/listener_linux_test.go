package guest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// unixListener runs pollListener on an AF_UNIX socket: the same code as
// the agent's vsock listener, since this kernel may have no vsock
// loopback transport to test AF_VSOCK itself.
func unixListener(t *testing.T) (*pollListener, string) {
	t.Helper()
	dir := shortdir.New(t) // unix socket paths are short
	path := filepath.Join(dir, "s")
	l, err := listen(unix.AF_UNIX, &unix.SockaddrUnix{Name: path}, "test socket")
	must(t, err)
	t.Cleanup(func() {
		// A Close that hangs fails the test instead of stalling it.
		done := make(chan struct{})
		go func() { l.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Error("Close hangs")
		}
	})
	return l, path
}

type acceptResult struct {
	f   *os.File
	err error
}

func acceptAsync(l *pollListener) <-chan acceptResult {
	ch := make(chan acceptResult, 1)
	go func() {
		f, err := l.Accept()
		ch <- acceptResult{f, err}
	}()
	return ch
}

// Close must end an Accept blocked with no connection in sight at once,
// not leave the agent's stop to systemd's kill.
func TestCloseWakesABlockedAccept(t *testing.T) {
	l, _ := unixListener(t)
	res := acceptAsync(l)
	select {
	case r := <-res:
		t.Fatalf("Accept returned with no connection: %v, %v", r.f, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case r := <-res:
		if !errors.Is(r.err, net.ErrClosed) {
			t.Errorf("Accept after Close = %v, %v; want net.ErrClosed", r.f, r.err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not wake the blocked Accept")
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close = %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not return")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %s", d)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept on a closed listener = %v; want net.ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// Connections that arrive while Accept waits, and ones queued before it
// is called, are accepted, and their data flows both ways.
func TestAcceptsConnections(t *testing.T) {
	l, path := unixListener(t)
	for i := range 3 {
		res := acceptAsync(l)
		if i == 1 {
			time.Sleep(50 * time.Millisecond) // Accept is waiting in poll
		}
		c, err := net.Dial("unix", path)
		must(t, err)
		var r acceptResult
		select {
		case r = <-res:
		case <-time.After(2 * time.Second):
			t.Fatalf("connection %d not accepted", i)
		}
		must(t, r.err)
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(r.f, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("read %q, %v", buf, err)
		}
		if _, err := r.f.Write([]byte("pong")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "pong" {
			t.Fatalf("read back %q, %v", buf, err)
		}
		c.Close()
		r.f.Close()
	}
}

// The agent's accept loop (runVsock's) ends as soon as its context does,
// with a session open.
func TestAcceptLoopEndsWithItsContext(t *testing.T) {
	l, path := unixListener(t)
	s := &Server{Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.acceptLoop(ctx, l) }()
	c, err := net.Dial("unix", path)
	must(t, err)
	defer c.Close()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("accept loop ended early: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("accept loop = %v; want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the accept loop outlived its context")
	}
}
