package router

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmdock/vmdock/network/domains"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// guest stands in for a profile's guest: a dial function that maps the
// containers' guest addresses to real servers on loopback, counting dials.
type guest struct {
	addrs map[string]string
	dials atomic.Int32
}

func (g *guest) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	real, ok := g.addrs[addr]
	if !ok || network != "tcp" {
		return nil, fmt.Errorf("guest: nothing at %s %s", network, addr)
	}
	g.dials.Add(1)
	var d net.Dialer
	return d.DialContext(ctx, "tcp", real)
}

// backend starts a real HTTP server on loopback, its address as the
// container at guestAddr of g.
func backend(t *testing.T, g *guest, guestAddr string, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	g.addrs[guestAddr] = s.Listener.Addr().String()
	return s
}

// front serves r over plain HTTP on loopback and returns its base URL.
func frontURL(t *testing.T, r *Router) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := r.Server(nil)
	go Serve(srv, ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// get sends a request for name to the router at base.
func get(t *testing.T, c *http.Client, base, name string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/path?q=1", nil)
	req.Host = name
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func echo(tag string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s host=%s uri=%s xff=%s proto=%s xhost=%s", tag, r.Host, r.RequestURI,
			r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"))
	})
}

func TestTwoProfilesOneRouter(t *testing.T) {
	def, dev := &guest{addrs: map[string]string{}}, &guest{addrs: map[string]string{}}
	// both guests have a container "web" at the same guest address: only
	// the profile's own dial function tells them apart
	backend(t, def, "172.17.0.2:80", echo("default-web"))
	backend(t, dev, "172.17.0.2:80", echo("dev-web"))
	r := New()
	r.Register("default", def.dial)
	r.Register("dev", dev.dial)
	web := []domains.Container{{ID: "1", Name: "web", IP: "172.17.0.2"}}
	if err := r.SetTable("default", domains.Build("default", web)); err != nil {
		t.Fatal(err)
	}
	if err := r.SetTable("dev", domains.Build("dev", web)); err != nil {
		t.Fatal(err)
	}
	base := frontURL(t, r)
	c := &http.Client{}

	for name, want := range map[string]string{"web.vmdock.localhost": "default-web", "WEB.dev.vmdock.localhost:8080": "dev-web"} {
		resp, body := get(t, c, base, name)
		if resp.StatusCode != 200 || !strings.HasPrefix(body, want+" ") {
			t.Errorf("%s: %d %q, want %s", name, resp.StatusCode, body, want)
		}
		if !strings.Contains(body, "host="+name+" ") || !strings.Contains(body, "uri=/path?q=1 ") ||
			!strings.Contains(body, "xff=127.0.0.1 ") || !strings.Contains(body, "proto=http ") || !strings.HasSuffix(body, "xhost="+name) {
			t.Errorf("%s: the container saw %q", name, body)
		}
	}

	r.Unregister("dev")
	if resp, _ := get(t, c, base, "web.dev.vmdock.localhost"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("after Unregister: %d, want 404", resp.StatusCode)
	}
	if resp, _ := get(t, c, base, "web.vmdock.localhost"); resp.StatusCode != 200 {
		t.Errorf("the default profile lost its name with dev's: %d", resp.StatusCode)
	}
	if err := r.SetTable("dev", domains.Build("dev", web)); err == nil {
		t.Error("SetTable of an unregistered profile succeeded")
	}
}

func TestUnknownNameAndProblemsAnswerAtOnce(t *testing.T) {
	g := &guest{addrs: map[string]string{}}
	r := New()
	r.Register("default", g.dial)
	r.SetTable("default", domains.Build("default", []domains.Container{ //nolint:errcheck
		{ID: "1", Name: "multi", IP: "172.17.0.3", Exposed: []int{80, 9000}},
		{ID: "2", Name: "gone", IP: "172.17.0.4"}, // no server behind it
	}))
	base := frontURL(t, r)
	c := &http.Client{Timeout: 2 * time.Second}
	for _, tc := range []struct {
		name, want string
		code       int
	}{
		{"nope.vmdock.localhost", "nope.vmdock.localhost", 404},
		{"multi.vmdock.localhost", "80, 9000", 502},
		{"gone.vmdock.localhost", "did not answer", 502},
	} {
		start := time.Now()
		resp, body := get(t, c, base, tc.name)
		if resp.StatusCode != tc.code || !strings.Contains(body, tc.want) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: %d %q, want %d and %q", tc.name, resp.StatusCode, body, tc.code, tc.want)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s took %v", tc.name, d)
		}
	}
}

func TestKeepAliveBothSides(t *testing.T) {
	g := &guest{addrs: map[string]string{}}
	var backendConns atomic.Int32
	// ConnState is set before the server starts: setting it after is a race
	s := httptest.NewUnstartedServer(echo("web"))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			backendConns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	g.addrs["172.17.0.2:80"] = s.Listener.Addr().String()
	r := New()
	r.Register("default", g.dial)
	r.SetTable("default", domains.Build("default", []domains.Container{{ID: "1", Name: "web", IP: "172.17.0.2"}})) //nolint:errcheck
	base := frontURL(t, r)

	var frontConns atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, n, a string) (net.Conn, error) {
		frontConns.Add(1)
		return (&net.Dialer{}).DialContext(ctx, n, a)
	}}
	c := &http.Client{Transport: tr}
	for range 5 {
		if resp, _ := get(t, c, base, "web.vmdock.localhost"); resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
	}
	if frontConns.Load() != 1 || backendConns.Load() != 1 || g.dials.Load() != 1 {
		t.Errorf("5 requests took %d client connections, %d container connections, %d dials; want 1 each",
			frontConns.Load(), backendConns.Load(), g.dials.Load())
	}
}

func TestServerSentEventsStream(t *testing.T) {
	g := &guest{addrs: map[string]string{}}
	release := make(chan struct{})
	backend(t, g, "172.17.0.2:80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		// the second event waits until the client has the first: a router
		// that buffers never lets the client see it
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
		fmt.Fprint(w, "data: second\n\n")
	}))
	r := New()
	r.Register("default", g.dial)
	r.SetTable("default", domains.Build("default", []domains.Container{{ID: "1", Name: "sse", IP: "172.17.0.2"}})) //nolint:errcheck
	base := frontURL(t, r)

	req, _ := http.NewRequest("GET", base+"/", nil)
	req.Host = "sse.vmdock.localhost"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if line != "data: first\n" {
			t.Errorf("first line %q", line)
		}
	case <-time.After(2 * time.Second):
		t.Error("the first event did not arrive while the container held the stream open")
	}
	close(release)
}

func TestLargeUploadStreams(t *testing.T) {
	g := &guest{addrs: map[string]string{}}
	backend(t, g, "172.17.0.2:80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	}))
	r := New()
	r.Register("default", g.dial)
	r.SetTable("default", domains.Build("default", []domains.Container{{ID: "1", Name: "up", IP: "172.17.0.2"}})) //nolint:errcheck
	base := frontURL(t, r)

	const size = 32 << 20
	pr, pw := io.Pipe()
	sum := sha256.New()
	go func() {
		_, err := io.CopyN(io.MultiWriter(pw, sum), rand.Reader, size)
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest("POST", base+"/upload", pr) // chunked: no length known
	req.Host = "up.vmdock.localhost"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if want := fmt.Sprintf("%d %x", size, sum.Sum(nil)); string(body) != want {
		t.Errorf("container got %q, want %q", body, want)
	}
}

func TestWebSocketUpgrade(t *testing.T) {
	g := &guest{addrs: map[string]string{}}
	wsEchoBackend(t, g, "172.17.0.2:80")
	r := New()
	r.Register("default", g.dial)
	r.SetTable("default", domains.Build("default", []domains.Container{{ID: "1", Name: "ws", IP: "172.17.0.2"}})) //nolint:errcheck
	base := frontURL(t, r)

	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: ws.vmdock.localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %s", resp.Status)
	}
	for _, msg := range []string{"hello\n", "again\n"} {
		fmt.Fprint(conn, msg)
		line, err := br.ReadString('\n')
		if err != nil || line != "echo "+msg {
			t.Errorf("after the upgrade: %q %v, want echo %q", line, err, msg)
		}
	}
}

// A router behind another (the port owner's, over a unix socket) keeps
// the client's X-Forwarded-* headers.
func TestRouterBehindRouterKeepsForwarded(t *testing.T) {
	g := &guest{addrs: map[string]string{}}
	backend(t, g, "172.17.0.2:80", echo("web"))
	back := New()
	back.KeepForwarded = true
	back.Register("dev", g.dial)
	web := []domains.Container{{ID: "1", Name: "web", IP: "172.17.0.2"}}
	back.SetTable("dev", domains.Build("dev", web)) //nolint:errcheck
	sock := filepath.Join(shortdir.New(t), "domains.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := back.Server(nil)
	go Serve(srv, ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })

	front := New()
	front.Register("dev", func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	})
	front.SetTable("dev", domains.Build("dev", web)) //nolint:errcheck
	base := frontURL(t, front)
	req, _ := http.NewRequest("GET", base+"/p", nil)
	req.Host = "web.dev.vmdock.localhost"
	req.Header.Set("X-Forwarded-Proto", "gopher") // a client's own value is not believed by the front
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if want := "web host=web.dev.vmdock.localhost uri=/p xff=127.0.0.1 proto=http xhost=web.dev.vmdock.localhost"; string(b) != want {
		t.Errorf("through two routers the container saw %q, want %q", b, want)
	}
}

// A container whose only port is not a web port is not routed to on its
// own: the page says which label routes it.
func TestNoWebPortPageNamesTheLabel(t *testing.T) {
	g := &guest{addrs: map[string]string{}}
	backend(t, g, "172.17.0.2:11211", echo("memcached"))
	r := New()
	r.Register("default", g.dial)
	r.SetTable("default", domains.Build("default", []domains.Container{{ID: "1", Name: "cache", IP: "172.17.0.2", Exposed: []int{11211}}})) //nolint:errcheck
	resp, body := get(t, &http.Client{}, frontURL(t, r), "cache.vmdock.localhost")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, domains.LabelHTTPPort+"=11211") || g.dials.Load() != 0 {
		t.Errorf("only port 11211: %d %q (dials %d), want the page naming the label and no dial", resp.StatusCode, body, g.dials.Load())
	}
}

// wsEchoBackend is a minimal WebSocket container at addr: it switches
// protocols and echoes lines, which is all a WebSocket needs of the router.
func wsEchoBackend(t *testing.T, g *guest, addr string) {
	t.Helper()
	backend(t, g, addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want upgrade", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			fmt.Fprint(brw, "echo "+line)
			brw.Flush()
		}
	}))
}
