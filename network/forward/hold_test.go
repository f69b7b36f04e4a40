package forward

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// holdCounter is a Hold that counts open uses and every use taken.
type holdCounter struct {
	mu    sync.Mutex
	open  int
	taken int
	err   error
}

func (h *holdCounter) hold(context.Context) (func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return nil, h.err
	}
	h.open++
	h.taken++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			h.open--
			h.mu.Unlock()
		})
	}, nil
}

func (h *holdCounter) counts() (open, taken int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open, h.taken
}

// Every connection through the docker socket, a tunnelled port and a
// direct port is held while open, and refused when the hold fails (the
// VM could not be woken).
func TestConnectionsAreHeldWhileOpen(t *testing.T) {
	g := newFakeGuest(t)
	h := &holdCounter{}

	dir := shortdir.New(t)
	guestSock := filepath.Join(dir, "guest.sock")
	gl, err := net.Listen("unix", guestSock)
	if err != nil {
		t.Fatal(err)
	}
	defer gl.Close()
	countServer(t, gl)
	hostSock := filepath.Join(dir, "docker.sock")
	sf, err := ListenSocketHeld(hostSock, "unix", guestSock, g.dial, h.hold)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	c, err := net.Dial("unix", hostSock)
	if err != nil {
		t.Fatal(err)
	}
	if !eventually(2*time.Second, func() bool { o, _ := h.counts(); return o == 1 }) {
		t.Fatal("a docker socket connection is not held")
	}
	c.Close()
	if !eventually(2*time.Second, func() bool { o, n := h.counts(); return o == 0 && n == 1 }) {
		t.Fatal("a closed docker socket connection is still held")
	}

	tunnelled, direct := freePort(t), freePort(t)
	g.route(tunnelled, taggedServer(t, "tunnel"))
	d := &fakeDirect{to: map[int]string{direct: taggedServer(t, "direct")}}
	f := newForwarder(t, g, PortForwarderConfig{Direct: d, Hold: h.hold})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "127.0.0.1", Port: tunnelled})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: direct})
	if !eventually(2*time.Second, func() bool { return pathOf(f, direct) == PathDirect }) {
		t.Fatal("direct path never opened")
	}
	if got := readVia(t, tunnelled); got != "tunnel" {
		t.Fatalf("tunnelled port read %q", got)
	}
	if got := readVia(t, direct); got != "direct" {
		t.Fatalf("direct port read %q", got)
	}
	if !eventually(2*time.Second, func() bool { o, n := h.counts(); return o == 0 && n == 3 }) {
		o, n := h.counts()
		t.Fatalf("port connections: %d open, %d taken; want 0 and 3", o, n)
	}

	h.mu.Lock()
	h.err = errors.New("the VM could not be woken")
	h.mu.Unlock()
	if got := readVia(t, tunnelled); got != "" {
		t.Fatalf("a connection the hold refused was served: %q", got)
	}
	if n := len(g.dialLog()); n != 2 {
		t.Errorf("the guest was dialled %d times, want 2 (none for the refused connection)", n)
	}
}
