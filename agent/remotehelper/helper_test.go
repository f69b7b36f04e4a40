package remotehelper

import (
	"github.com/vmdock/vmdock/internal/shortdir"

	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
)

// fakeEngine answers the three API calls the helper makes on a unix
// socket: its containers' ports can change, and each change is an event.
type fakeEngine struct {
	mu     sync.Mutex
	ports  string // the /containers/json body
	events chan string
}

func (e *fakeEngine) set(ports string) {
	e.mu.Lock()
	e.ports = ports
	e.mu.Unlock()
	e.events <- `{"Type":"container","Action":"start"}`
}

func startFakeEngine(t *testing.T) (*fakeEngine, string) {
	sock := filepath.Join(shortdir.New(t), "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	e := &fakeEngine{ports: "[]", events: make(chan string, 4)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containers/json", func(w http.ResponseWriter, _ *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		io.WriteString(w, e.ports)
	})
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case ev := <-e.events:
				io.WriteString(w, ev+"\n")
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("GET /networks/bridge", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"IPAM":{"Config":[{"Subnet":"172.17.0.0/16","Gateway":"127.0.0.1"}]}}`)
	})
	mux.HandleFunc("GET /_ping", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "OK") })
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return e, sock
}

// connect runs the helper on one end of a pipe and the host's client on
// the other, as over ssh.
func connect(t *testing.T, o Options) *agent.Client {
	host, server := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(ctx, slog.New(slog.DiscardHandler), server, o)
	}()
	c, err := agent.Connect(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); cancel(); <-done })
	return c
}

func next(t *testing.T, events <-chan agent.PortEvent) agent.PortEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the port watch ended")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no port event within 5 s")
	}
	return agent.PortEvent{}
}

func TestPublishedPortsFollowTheEngine(t *testing.T) {
	e, sock := startFakeEngine(t)
	e.ports = `[{"Ports":[{"IP":"0.0.0.0","PrivatePort":80,"PublicPort":8080,"Type":"tcp"},{"PrivatePort":9000,"Type":"tcp"}]}]`
	c := connect(t, Options{Socket: sock})
	events, err := c.WatchPorts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events); !ev.Added || ev.Port != 8080 || ev.Proto != "tcp" || ev.IP != "0.0.0.0" {
		t.Fatalf("first event %+v; want 8080/tcp on 0.0.0.0 added (the unpublished 9000 left out)", ev)
	}
	if ev := next(t, events); !ev.Synced {
		t.Fatalf("event %+v; want the synced mark after the listing", ev)
	}
	e.set(`[{"Ports":[{"IP":"::","PublicPort":5353,"Type":"udp"}]}]`)
	got := map[string]bool{}
	for range 2 {
		ev := next(t, events)
		got[fmt.Sprintf("%v %s %s %d", ev.Added, ev.Proto, ev.IP, ev.Port)] = true
	}
	if !got["false tcp 0.0.0.0 8080"] || !got["true udp :: 5353"] {
		t.Errorf("events after a container event %v; want 8080 gone and 5353/udp added", got)
	}
}

func TestDialReachesTheEngineAndRefusesOtherOps(t *testing.T) {
	_, sock := startFakeEngine(t)
	c := connect(t, Options{Socket: sock})
	conn, err := c.Dial(context.Background(), "unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET /_ping HTTP/1.0\r\n\r\n")
	b, _ := io.ReadAll(conn)
	if !strings.HasSuffix(string(b), "OK") {
		t.Errorf("ping through the helper answered %q", b)
	}
	info, err := c.Info(context.Background())
	if err != nil || info.Version != agent.Version {
		t.Errorf("info %+v, %v", info, err)
	}
	if err := c.StartDocker(context.Background()); err == nil || !strings.Contains(err.Error(), "not served on a remote server") {
		t.Errorf("docker op on a remote server: %v; want it refused", err)
	}
	if _, err := c.Dial(context.Background(), "udp", "127.0.0.1:53"); err == nil {
		t.Error("a udp dial was taken")
	}
}

func TestHostPortsRelayToTheHost(t *testing.T) {
	_, sock := startFakeEngine(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // the helper listens on the "gateway" (127.0.0.1 here) at this port
	c := connect(t, Options{Socket: sock, HostPorts: []int{port}})
	var asked agent.Request
	c.HandleGuestStreams(func(req agent.Request, conn net.Conn) {
		asked = req
		agent.Reply(conn, nil)
		io.WriteString(conn, "from the laptop")
		conn.Close()
	})
	var b []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		b, _ = io.ReadAll(conn)
		conn.Close()
		break
	}
	if string(b) != "from the laptop" || asked.Op != agent.OpHostDial || asked.Port != port {
		t.Fatalf("a container's connection got %q, the host was asked %+v; want the host's answer for port %d", b, asked, port)
	}
}
