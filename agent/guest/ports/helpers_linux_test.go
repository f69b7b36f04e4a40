package ports

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

func newTestWatch(t *testing.T) (*Watch, *guestostest.FakeOS) {
	t.Helper()
	sys, fos := guestostest.NewSys(t)
	return &Watch{Sys: sys, Poll: Poll{Fast: 20 * time.Millisecond}}, fos
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// serve runs w's watch for a host on the other end of a pipe and returns
// the events it reports; the watch ends with the test.
func serve(t *testing.T, w *Watch) <-chan agent.PortEvent {
	t.Helper()
	host, guest := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Serve(ctx, guest); close(done) }()
	t.Cleanup(func() { cancel(); host.Close(); <-done })
	if _, err := agent.ReadResponse(host); err != nil {
		t.Fatalf("watch request: %v", err)
	}
	ch := make(chan agent.PortEvent, 100)
	go func() {
		defer close(ch)
		for {
			var ev agent.PortEvent
			if err := agent.ReadJSONLine(host, &ev); err != nil {
				return
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
