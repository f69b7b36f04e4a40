package forward

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// syncBuf collects log output written from several goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func bufLogger(b *syncBuf) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func TestPortForwarderCapsPortsAndLogsOnce(t *testing.T) {
	var logs syncBuf
	g := newFakeGuest(t)
	f := newForwarder(t, g, PortForwarderConfig{MaxPorts: 3, Log: bufLogger(&logs)})
	ports := make([]int, 6)
	for i := range ports {
		ports[i] = freePort(t)
		f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: ports[i]})
	}
	if got := len(f.Ports()); got != 3 {
		t.Fatalf("%d ports forwarded, want the cap of 3: %+v", got, f.Ports())
	}
	if f.Refused() != 3 {
		t.Errorf("Refused() = %d, want 3", f.Refused())
	}
	for _, p := range ports[3:] {
		if err := tryBind("tcp", p); err != nil {
			t.Errorf("refused port %d has a host listener anyway: %v", p, err)
		}
	}
	if n := strings.Count(logs.String(), "forwarding limit"); n != 1 {
		t.Fatalf("refusal logged %d times, want once:\n%s", n, logs.String())
	}

	// A port that closes makes room; the next refusal streak is logged again.
	f.Apply(PortEvent{Proto: "tcp", IP: "0.0.0.0", Port: ports[0]})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: ports[3]})
	if err := tryBind("tcp", ports[3]); err == nil {
		t.Fatalf("port %d not forwarded after another one closed", ports[3])
	}
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: ports[4]})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: ports[5]})
	if n := strings.Count(logs.String(), "forwarding limit"); n != 2 {
		t.Fatalf("refusal logged %d times after a second streak, want 2:\n%s", n, logs.String())
	}
	if d := NewPortForwarder(PortForwarderConfig{}); d.opts.MaxPorts != DefaultMaxPorts {
		t.Errorf("default MaxPorts = %d, want %d", d.opts.MaxPorts, DefaultMaxPorts)
	}
}

func TestPortForwarderCapsGuestIPsPerPort(t *testing.T) {
	g := newFakeGuest(t)
	f := newForwarder(t, g, PortForwarderConfig{})
	port := freePort(t)
	for i := range 1000 {
		f.Apply(PortEvent{Added: true, Proto: "tcp", IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), Port: port})
	}
	f.mu.Lock()
	n := len(f.fwds[fwdKey{"tcp", port}].guestIPs)
	f.mu.Unlock()
	if n != maxGuestIPs {
		t.Fatalf("%d guest IPs remembered for one port, want the cap %d", n, maxGuestIPs)
	}
}

// After a reconnect the guest lists its ports again: ports it no longer
// has are closed, the ones it still has keep their listener, new ones open.
func TestPortForwarderSyncDropsWhatTheNewListingLacks(t *testing.T) {
	srv := echoTCPServer(t)
	g := newFakeGuest(t)
	f := newForwarder(t, g, PortForwarderConfig{})
	kept, gone, fresh := freePort(t), freePort(t), freePort(t)
	for _, p := range []int{kept, gone, fresh} {
		g.route(p, srv.Addr().String())
	}
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: kept})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "::", Port: kept})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: gone})
	before, err := net.Dial("tcp", portAddr(kept))
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()

	f.BeginSync()
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "::", Port: kept})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: fresh})
	f.EndSync()

	want := []int{kept, fresh}
	var got []int
	for _, p := range f.Ports() {
		got = append(got, p.GuestPort)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ports after sync = %v, want %v", got, want)
	}
	if err := tryBind("tcp", gone); err != nil {
		t.Errorf("port %d the new listing lacks still has a listener: %v", gone, err)
	}
	for _, p := range want {
		echoOnce(t, portAddr(p))
	}
	f.mu.Lock()
	ips := f.fwds[fwdKey{"tcp", kept}].guestIPs
	_, stale := ips["0.0.0.0"]
	f.mu.Unlock()
	if stale || len(ips) != 1 {
		t.Errorf("guest IPs of port %d after sync = %v, want only ::", kept, ips)
	}
	// A connection through a port that stayed is left alone.
	before.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := before.Write([]byte("still")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(before, b); err != nil || string(b) != "still" {
		t.Fatalf("connection opened before the sync: %q, %v", b, err)
	}
}

func echoOnce(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("%s echoed %q, %v", addr, b, err)
	}
}

// emfileChildEnv marks the subprocess of TestForwardersKeepAcceptingAfterEMFILE:
// it lowers its own file limit and runs out of descriptors, which must not
// happen to the test binary that runs every other test.
const emfileChildEnv = "VMDOCK_TEST_EMFILE_CHILD"

func TestForwardersKeepAcceptingAfterEMFILE(t *testing.T) {
	if os.Getenv(emfileChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestForwardersKeepAcceptingAfterEMFILE$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), emfileChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child with a low file limit: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	var logs syncBuf
	log := bufLogger(&logs)
	slog.SetDefault(log)
	lim := syscall.Rlimit{Cur: 256, Max: 256}
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &cur); err != nil {
		t.Fatal(err)
	}
	lim.Max = cur.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}

	dir := shortdir.New(t)
	guestSock := filepath.Join(dir, "guest.sock")
	gl, err := net.Listen("unix", guestSock)
	if err != nil {
		t.Fatal(err)
	}
	defer gl.Close()
	go serveEcho(gl)
	g := newFakeGuest(t)
	hostSock := filepath.Join(dir, "docker.sock")
	sf, err := ListenSocket(hostSock, "unix", guestSock, g.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	srv := echoTCPServer(t)
	port := freePort(t)
	g.route(port, srv.Addr().String())
	pf := newForwarder(t, g, PortForwarderConfig{Log: log})
	pf.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})

	for _, tc := range []struct{ name, network, addr string }{
		{"socket forwarder", "unix", hostSock},
		{"port forwarder", "tcp", portAddr(port)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Lines of this listener only: the other one may fail its own
			// accepts meanwhile (both sit in the process whose descriptors
			// run out), and a streak of failures is logged once, at its
			// start, so a streak already running counts as failing now.
			failures := func() (failed, recovered int) {
				for _, line := range strings.Split(logs.String(), "\n") {
					if strings.Contains(line, tc.addr) {
						failed += strings.Count(line, "accept failed")
						recovered += strings.Count(line, "accepting again")
					}
				}
				return failed, recovered
			}
			before, _ := failures()
			fill := exhaustFDs(t)
			// One free slot for the client; the forwarder's accept finds none.
			fill[len(fill)-1].Close()
			fill = fill[:len(fill)-1]
			c, err := net.Dial(tc.network, tc.addr)
			if err != nil {
				closeAll(fill)
				t.Fatalf("dial with one descriptor left: %v", err)
			}
			defer c.Close()
			if !eventually(5*time.Second, func() bool { f, r := failures(); return f > before || f > r }) {
				closeAll(fill)
				t.Fatalf("accept never failed with every descriptor taken; log:\n%s", logs.String())
			}
			time.Sleep(50 * time.Millisecond) // a few retries while still out of descriptors
			closeAll(fill)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 4)
			if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
				t.Fatalf("connection made during EMFILE: echo %q, %v; log:\n%s", b, err, logs.String())
			}
			c2, err := net.Dial(tc.network, tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			c2.SetDeadline(time.Now().Add(5 * time.Second))
			c2.Write([]byte("pong"))
			if _, err := io.ReadFull(c2, b); err != nil || string(b) != "pong" {
				t.Fatalf("connection after EMFILE: echo %q, %v", b, err)
			}
		})
	}
	if !strings.Contains(logs.String(), "accepting again") {
		t.Errorf("recovery not logged:\n%s", logs.String())
	}
}

// exhaustFDs opens /dev/null until the process is out of descriptors.
func exhaustFDs(t *testing.T) []*os.File {
	t.Helper()
	var fill []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				closeAll(fill)
				t.Fatalf("filling the descriptor table: %v", err)
			}
			return fill
		}
		fill = append(fill, f)
		if len(fill) > 100000 {
			closeAll(fill)
			t.Fatal("the file limit did not take effect")
		}
	}
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
