package sharedrouter

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vmdock/vmdock/network/domains"
	"github.com/vmdock/vmdock/network/domains/localca"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// fakeDocker is the guest's docker API as the router's watch sees it: a
// container list the test changes, and an event stream it feeds.
type fakeDocker struct {
	mu     sync.Mutex
	list   string
	events chan string
}

func (f *fakeDocker) set(list string) {
	f.mu.Lock()
	f.list = list
	f.mu.Unlock()
	f.events <- `{"Type":"container","Action":"destroy"}`
}

func (f *fakeDocker) serve(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(shortdir.New(t), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/containers/json":
			f.mu.Lock()
			fmt.Fprint(w, f.list)
			f.mu.Unlock()
		case "/events":
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			for {
				select {
				case ev := <-f.events:
					fmt.Fprintln(w, ev)
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		}
	}))
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return sock
}

const webList = `[{"Id":"a","Names":["/web"],"Created":1,"NetworkSettings":{"Networks":{"bridge":{"IPAddress":"172.17.0.2"}}}}]`

func TestDomainsFollowDockerEvents(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "web saw %s %s", r.Host, r.Header.Get("X-Forwarded-Proto"))
	}))
	defer web.Close()
	fd := &fakeDocker{list: webList, events: make(chan string)}
	sock := fd.serve(t)
	var holds, taken atomic.Int32
	home := testHome(t, "dev")
	d, notes, err := startNoting(Settings{
		Profile: "dev",
		Home:    home,
		Ports:   Ports{}, // port 0: any free port
		Binds:   []string{"127.0.0.1"},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != "172.17.0.2:80" {
				return nil, fmt.Errorf("no container at %s", addr)
			}
			return (&net.Dialer{}).DialContext(ctx, network, web.Listener.Addr().String())
		},
		Docker: func(ctx context.Context) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, "unix", sock) },
		Hold: func(context.Context) (func(), error) {
			holds.Add(1)
			taken.Add(1)
			return func() { holds.Add(-1) }, nil
		},
	})
	if err != nil || len(notes) != 0 {
		t.Fatalf("start: %v %q", err, notes)
	}
	defer d.Close()
	httpAddr, httpsAddr := d.listening("http")[0].String(), d.listening("https")[0].String()

	ca, err := localca.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			to := httpAddr
			if strings.HasSuffix(addr, ":443") {
				to = httpsAddr
			}
			return (&net.Dialer{}).DialContext(ctx, "tcp", to)
		},
	}}
	fetch := func(url string) (int, string) {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// the first list comes once the event stream is open
	deadline := time.Now().Add(2 * time.Second)
	for {
		code, body := fetch("http://web.dev.vmdock.localhost/")
		if code == 200 {
			if body != "web saw web.dev.vmdock.localhost http" {
				t.Errorf("http: %q", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("web.dev.vmdock.localhost never appeared: %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := fetch("https://web.dev.vmdock.localhost/"); code != 200 || body != "web saw web.dev.vmdock.localhost https" {
		t.Errorf("https: %d %q", code, body)
	}
	if taken.Load() == 0 || holds.Load() != 0 {
		t.Errorf("requests took %d holds and left %d; want some, none left", taken.Load(), holds.Load())
	}

	// the container goes: its name goes with the event, well within 2 s
	fd.set("[]")
	deadline = time.Now().Add(2 * time.Second)
	for {
		code, _ := fetch("http://web.dev.vmdock.localhost/")
		if code == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the removed container's name still answers %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDomainsPortTakenIsANoteAndTheRestRuns(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	fd := &fakeDocker{list: "[]", events: make(chan string)}
	sock := fd.serve(t)
	d, notes, err := startNoting(Settings{
		Profile: "default", Home: testHome(t, "default"),
		Ports:  Ports{HTTPPort: port},
		Binds:  []string{"127.0.0.1"},
		Dial:   func(context.Context, string, string) (net.Conn, error) { return nil, os.ErrNotExist },
		Docker: func(ctx context.Context) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, "unix", sock) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(notes) != 1 || !strings.Contains(notes[0], fmt.Sprintf("port %d (domains.httpPort) is in use (a published port or another server); the router takes it once it is free", port)) {
		t.Errorf("notes %q, want one naming domains.httpPort", notes)
	}
	if len(d.listening("http")) != 0 || len(d.listening("https")) != 1 {
		t.Errorf("listening on %v %v, want HTTPS only", d.listening("http"), d.listening("https"))
	}
}

// startNoting is Start with the notes the host agent would show
// collected, and a profile check for registrations.
func startNoting(s Settings) (*Server, []string, error) {
	var notes []string
	s.Note = func(n string) { notes = append(notes, n) }
	s.ValidProfile = validProfile
	d, err := Start(s)
	return d, notes, err
}

// validProfile accepts what can be a folder name under the home.
func validProfile(p string) error {
	if p == "" || p != filepath.Base(p) || strings.HasPrefix(p, ".") {
		return fmt.Errorf("profile %q is not accepted", p)
	}
	return nil
}

// testHome is a $VMDOCK_HOME with the profiles' instance folders.
func testHome(t *testing.T, profiles ...string) string {
	t.Helper()
	home := shortdir.New(t)
	for _, p := range profiles {
		if err := os.Mkdir(filepath.Join(home, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

func TestPortNoteForARefusedPort(t *testing.T) {
	err := &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", syscall.EACCES)}
	n := portNote("httpPort", 80, err)
	if !strings.Contains(n, "refused port 80 (domains.httpPort") || !strings.Contains(n, "set domains.httpPort to 1024 or above") || strings.Contains(n, "\n") {
		t.Errorf("note %q", n)
	}
}

// freePort is a loopback port nothing listens on (just now).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// agentFor is one host agent's domains with one container, web, whose
// server answers with tag.
func agentFor(t *testing.T, home, profile, tag string, cfg Ports, holds *atomic.Int32) (*Server, []string) {
	t.Helper()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", tag, r.Host, r.Header.Get("X-Forwarded-Proto"))
	}))
	t.Cleanup(web.Close)
	fd := &fakeDocker{list: webList, events: make(chan string)}
	sock := fd.serve(t)
	d, notes, err := startNoting(Settings{
		Profile: profile, Home: home, Ports: cfg, Binds: []string{"127.0.0.1"},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, web.Listener.Addr().String())
		},
		Docker: func(ctx context.Context) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, "unix", sock) },
		Hold: func(context.Context) (func(), error) {
			holds.Add(1)
			return func() {}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, notes
}

func TestTwoAgentsShareThePortsAndHandThemOver(t *testing.T) {
	home := testHome(t, "default", "dev")
	cfg := Ports{HTTPPort: freePort(t), HTTPSPort: freePort(t), DNSPort: freeUDPPort(t)}
	var holdsA, holdsB atomic.Int32
	a, notes := agentFor(t, home, "default", "A", cfg, &holdsA)
	if len(notes) != 0 {
		t.Fatalf("first agent: %q", notes)
	}
	b, notes := agentFor(t, home, "dev", "B", cfg, &holdsB)
	defer b.Close()
	if len(notes) != 0 {
		t.Fatalf("second agent (registers with the first): %q", notes)
	}
	if len(b.listening("http"))+len(b.listening("https")) != 0 {
		t.Fatal("the second agent listens on the ports too")
	}

	ca, err := localca.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			port := cfg.HTTPPort
			if strings.HasSuffix(addr, ":443") {
				port = cfg.HTTPSPort
			}
			return (&net.Dialer{}).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		},
		DisableKeepAlives: true,
	}}
	// eventually: names appear as each agent's first list arrives, and
	// move when the owner changes
	eventually := func(url string, code int, body string) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Second)
		for {
			resp, err := c.Get(url)
			var got string
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got = string(b)
				if resp.StatusCode == code && (body == "" || got == body) {
					return
				}
				got = fmt.Sprintf("%d %q", resp.StatusCode, got)
			} else {
				got = err.Error()
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s, want %d %q", url, got, code, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	eventually("http://web.vmdock.localhost/", 200, "A web.vmdock.localhost http")
	eventually("http://web.dev.vmdock.localhost/", 200, "B web.dev.vmdock.localhost http")
	eventually("https://web.dev.vmdock.localhost/", 200, "B web.dev.vmdock.localhost https")
	if holdsB.Load() == 0 {
		t.Error("requests for dev's names did not hold dev's VM")
	}
	// `vmdock domains` asks the owner, which lists both profiles
	lc, err := net.Dial("unix", filepath.Join(home, domains.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(lc, `{"list":true}`)
	var l domains.Listing
	err = json.NewDecoder(lc).Decode(&l)
	lc.Close()
	names := map[string]string{}
	for _, r := range l.Routes {
		names[r.Name] = r.Profile
	}
	if err != nil || names["web.vmdock.localhost"] != "default" || names["web.dev.vmdock.localhost"] != "dev" ||
		len(l.Listening) != 3 || !strings.HasPrefix(l.Listening[0], "http://127.0.0.1:") || !strings.HasPrefix(l.Listening[2], "dns://127.0.0.1:") {
		t.Errorf("listing %+v (%v), want both profiles' names and the router's three addresses", l, err)
	}
	lookup(t, cfg.DNSPort)

	// the owner stops: the other agent takes the ports over
	a.Close()
	eventually("http://web.dev.vmdock.localhost/", 200, "B web.dev.vmdock.localhost http")
	eventually("https://web.dev.vmdock.localhost/", 200, "B web.dev.vmdock.localhost https")
	eventually("http://web.vmdock.localhost/", http.StatusNotFound, "")
	if len(b.listening("http")) != 1 {
		t.Errorf("after the hand-over the second agent listens on %v", b.listening("http"))
	}
	lookup(t, cfg.DNSPort)

	// the first comes back and registers with the new owner
	a2, notes := agentFor(t, home, "default", "A2", cfg, &holdsA)
	defer a2.Close()
	if len(notes) != 0 {
		t.Fatalf("restarted agent: %q", notes)
	}
	eventually("http://web.vmdock.localhost/", 200, "A2 web.vmdock.localhost http")
}

func freeUDPPort(t *testing.T) int {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

// lookup asks the owner's DNS responder, as the system resolver would.
func lookup(t *testing.T, port int) {
	t.Helper()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", fmt.Sprintf("127.0.0.1:%d", port))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ips, err := r.LookupHost(ctx, "web.dev.vmdock.localhost")
	if err != nil || len(ips) == 0 {
		t.Errorf("DNS on port %d: %v %v", port, ips, err)
	}
}

func TestStartWantsAProfileCheck(t *testing.T) {
	_, err := Start(Settings{Profile: "default", Home: testHome(t, "default"), Binds: []string{"127.0.0.1"}})
	if err == nil || !strings.Contains(err.Error(), "no profile check") {
		t.Errorf("Start without ValidProfile: %v, want an error", err)
	}
}

// An agent may register only a profile that names a folder of the home,
// and never the owner's own.
func TestRegistrationOfABadProfileIsRefused(t *testing.T) {
	home := testHome(t, "default")
	var holds atomic.Int32
	owner, _ := agentFor(t, home, "default", "A", Ports{HTTPPort: freePort(t), HTTPSPort: freePort(t)}, &holds)
	defer owner.Close()
	for _, profile := range []string{"../escape", "default"} {
		c, err := net.Dial("unix", filepath.Join(home, domains.SocketName))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second)) //nolint:errcheck
		fmt.Fprintf(c, "{\"profile\":%q}\n", profile)
		// the owner hangs up at once; a member's connection stays open
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("registering %q: read %v, want the owner to hang up", profile, err)
		}
		c.Close()
	}
}
