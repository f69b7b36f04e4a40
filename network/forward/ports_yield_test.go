package forward

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A published port wins over vmdock's container-domains router: the
// router (here a plain listener) gives its port up when asked and gets
// it back when the forward ends; a port held by anyone else stays an
// error.
func TestPortForwarderTakesAYieldedPort(t *testing.T) {
	g := newFakeGuest(t)
	routerPort, otherPort := freePort(t), freePort(t)
	other, err := net.Listen("tcp", portAddr(otherPort))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	var mu sync.Mutex
	router, err := net.Listen("tcp", portAddr(routerPort))
	if err != nil {
		t.Fatal(err)
	}
	var asked []int
	gaveBack := make(chan struct{}, 1)
	yield := func(port int) func() {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, port)
		if port != routerPort {
			return nil
		}
		// a router elsewhere frees the port a moment after it is asked
		go func() { time.Sleep(100 * time.Millisecond); router.Close() }()
		return func() {
			mu.Lock()
			defer mu.Unlock()
			var err error
			for try := 0; try < 100; try++ {
				if router, err = net.Listen("tcp", portAddr(routerPort)); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			gaveBack <- struct{}{}
		}
	}
	f := newForwarder(t, g, PortForwarderConfig{Yield: yield})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: routerPort})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: otherPort})

	byPort := map[int]ForwardedPort{}
	for _, p := range f.Ports() {
		byPort[p.GuestPort] = p
	}
	if p := byPort[routerPort]; p.Error != "" {
		t.Fatalf("the router's port was not taken over: %+v", p)
	}
	if p := byPort[otherPort]; !strings.Contains(p.Error+p.Warning, "127.0.0.1:"+strconv.Itoa(otherPort)+"/tcp: port already in use") {
		t.Errorf("a port held by another program: %+v, want it in use", p)
	}
	mu.Lock()
	if len(asked) < 2 {
		t.Errorf("Yield asked for %v, want both busy ports", asked)
	}
	mu.Unlock()

	f.Apply(PortEvent{Added: false, Proto: "tcp", IP: "0.0.0.0", Port: routerPort})
	select {
	case <-gaveBack:
	case <-time.After(5 * time.Second):
		t.Fatal("the port was not given back when the forward ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if router == nil {
		t.Fatal("the router could not bind its port again")
	}
	router.Close()
}
