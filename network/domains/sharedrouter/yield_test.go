package sharedrouter

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// bindable is whether a published port could take port now.
func bindable(port int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

func eventuallyTrue(within time.Duration, f func() bool) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if f() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return f()
}

// A published port wins over the router, whether the router is this
// agent's or the owner this agent registered with; the router gets the
// port back when the published port goes.
func TestPublishedPortWinsOverTheRouter(t *testing.T) {
	home := testHome(t, "default", "dev")
	cfg := Ports{HTTPPort: freePort(t), HTTPSPort: freePort(t)}
	var holds atomic.Int32
	owner, _ := agentFor(t, home, "default", "A", cfg, &holds)
	defer owner.Close()
	member, _ := agentFor(t, home, "dev", "B", cfg, &holds)
	defer member.Close()

	if owner.Yield(freePort(t)) != nil || member.Yield(freePort(t)) != nil {
		t.Fatal("a port the router does not hold was yielded")
	}
	for _, tc := range []struct {
		name string
		d    *Server
		port int
	}{{"this agent owns the router", owner, cfg.HTTPPort}, {"another agent owns the router", member, cfg.HTTPSPort}} {
		t.Run(tc.name, func(t *testing.T) {
			if bindable(tc.port) {
				t.Fatalf("port %d free before the yield", tc.port)
			}
			giveBack := tc.d.Yield(tc.port)
			if giveBack == nil {
				t.Fatal("the router's port was not yielded")
			}
			var published net.Listener
			if !eventuallyTrue(2*time.Second, func() bool {
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", tc.port))
				published = ln
				return err == nil
			}) {
				t.Fatal("the port did not come free")
			}
			for _, a := range append(owner.listening("http"), owner.listening("https")...) {
				if a.(*net.TCPAddr).Port == tc.port {
					t.Errorf("the router still lists %v", a)
				}
			}
			// a retake round while the port is yielded leaves it alone
			owner.retake()
			published.Close()
			giveBack()
			if !eventuallyTrue(3*time.Second, func() bool { return !bindable(tc.port) }) {
				t.Fatal("the router did not take its port back")
			}
			scheme := "http"
			if tc.port == cfg.HTTPSPort {
				scheme = "https"
			}
			if len(owner.listening(scheme)) != 1 {
				t.Errorf("router listens on %v for %s after the give-back", owner.listening(scheme), scheme)
			}
		})
	}
}

// A port the router could not have at the election (a published port
// held it) is bound once it is free.
func TestRouterRetakesAPortThatComesFree(t *testing.T) {
	saved := retakeEvery
	retakeEvery = 50 * time.Millisecond
	defer func() { retakeEvery = saved }()
	home := testHome(t, "default")
	cfg := Ports{HTTPPort: freePort(t), HTTPSPort: freePort(t)}
	published, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", cfg.HTTPPort))
	if err != nil {
		t.Fatal(err)
	}
	var holds atomic.Int32
	d, notes := agentFor(t, home, "default", "A", cfg, &holds)
	defer d.Close()
	if len(notes) != 1 || len(d.listening("http")) != 0 || len(d.listening("https")) != 1 {
		t.Fatalf("notes %q, http %v, https %v: want the HTTP port noted as taken", notes, d.listening("http"), d.listening("https"))
	}
	published.Close()
	if !eventuallyTrue(3*time.Second, func() bool { return len(d.listening("http")) == 1 }) {
		t.Fatal("the router did not bind its HTTP port once it was free")
	}
}
