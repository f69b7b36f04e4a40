package hostagent

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmdock/vmdock/network/forward"
	"github.com/vmdock/vmdock/network/usernet"
)

// A published port whose host listener was shut down under the host
// agent listens again after the watchdog's next look, which logs the
// repair and shows it in status; the look after that finds nothing to do.
func TestWatchdogBindsAgainADeadPublishedPort(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, echo.Addr().String())
	}
	f := forward.NewPortForwarder(forward.PortForwarderConfig{BindAddr: "127.0.0.1", Dial: dial})
	defer f.Close()
	port := freeLoopbackPort(t)
	f.Apply(forward.PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	echoesOver(t, addr)

	w := newWatchdog()
	paths := []watchPath{portsPath(f)}
	w.round(context.Background(), paths, false)
	if st := w.status(); st == nil || !st.Paths[0].OK || st.LastRepair != nil {
		t.Fatalf("with nothing broken: %+v", st)
	}
	shutDownListener(t, port)
	deadline := time.Now().Add(3 * time.Second)
	for w.status().LastRepair == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		w.round(context.Background(), paths, false)
	}
	st := w.status()
	if st.LastRepair == nil || st.LastRepair.Path != "ports" || !strings.Contains(st.LastRepair.What, addr) || !st.Paths[0].OK {
		t.Fatalf("after the listener died: %+v (last repair %+v)", st, st.LastRepair)
	}
	echoesOver(t, addr)
}

// While the VM is paused the watchdog looks at nothing.
func TestWatchdogRestsWhileThePauseHolds(t *testing.T) {
	w := newWatchdog()
	ticks := make(chan time.Time)
	looks := 0
	paused := true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		w.run(ctx, ticks, func() bool { return paused }, func() []watchPath { looks++; return nil })
		close(done)
	}()
	ticks <- time.Now()
	ticks <- time.Now()
	w.kick()
	ticks <- time.Now()
	cancel()
	<-done
	if looks != 0 {
		t.Fatalf("the watchdog looked %d times while the VM was paused", looks)
	}
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func echoesOver(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi" {
		t.Fatalf("echo over %s: %q, %v", addr, buf, err)
	}
}

// shutDownListener finds this process's listening socket on port and
// shuts it down, as a socket reset from outside would: its accept fails
// for good.
func shutDownListener(t *testing.T, port int) {
	t.Helper()
	for fd := 3; fd < 4096; fd++ {
		sa, err := syscall.Getsockname(fd)
		if err != nil {
			continue
		}
		in4, ok := sa.(*syscall.SockaddrInet4)
		if !ok || in4.Port != port {
			continue
		}
		if acc, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN); err != nil || acc != 1 {
			continue
		}
		if err := syscall.Shutdown(fd, syscall.SHUT_RDWR); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no listening socket on port %d", port)
}

// BenchmarkWatchdogIdleLook is one look of the watchdog at 20 healthy
// published ports and an idle stack: its cost every watchdogEvery while
// nothing fails.
func BenchmarkWatchdogIdleLook(b *testing.B) {
	dial := func(context.Context, string, string) (net.Conn, error) { return nil, io.EOF }
	f := forward.NewPortForwarder(forward.PortForwarderConfig{BindAddr: "127.0.0.1", Dial: dial})
	defer f.Close()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		f.Apply(forward.PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})
	}
	s, err := usernet.New(usernet.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var seen int64
	w := newWatchdog()
	paths := []watchPath{portsPath(f), relayPath(s, &seen), dnsPath(s)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		w.round(ctx, paths, false)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/watchdogEvery.Seconds()/1e9*100, "%cpu")
}
