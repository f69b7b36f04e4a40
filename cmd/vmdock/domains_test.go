package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/network/domains"
	"github.com/vmdock/vmdock/network/domains/localca"
)

// fakeEngine answers GET /containers/json on a profile's docker socket,
// as the host agent's forward of the guest's docker does.
func fakeEngine(t *testing.T, sock, list string) {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/containers/json" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, list)
	}))
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
}

func TestDomainsListsEveryRunningProfile(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	for _, p := range []string{"default", "dev", "idle"} {
		if out, err := run("start", "-p", p); err != nil {
			t.Fatalf("start %s: %v\n%s", p, err, out)
		}
	}
	fakeEngine(t, filepath.Join(home, "default", "docker.sock"), `[
		{"Id":"a","Names":["/web"],"Created":100,"Ports":[{"PrivatePort":8080,"Type":"tcp"}],"NetworkSettings":{"Networks":{"bridge":{"IPAddress":"172.17.0.2"}}}},
		{"Id":"b","Names":["/shop-api-1"],"Created":100,"Labels":{"com.docker.compose.project":"shop","com.docker.compose.service":"api","dev.vmdock.domains":"app.vmdock.localhost"},
		 "NetworkSettings":{"Networks":{"shop_default":{"IPAddress":"172.18.0.2"}}}},
		{"Id":"d","Names":["/front"],"Created":200,"Labels":{"dev.vmdock.domains":"app.vmdock.localhost"},
		 "Ports":[{"PrivatePort":3000,"Type":"tcp"}],"NetworkSettings":{"Networks":{"bridge":{"IPAddress":"172.17.0.3"}}}}]`)
	// dev's label for a name in the default profile's zone claims nothing
	fakeEngine(t, filepath.Join(home, "dev", "docker.sock"), `[
		{"Id":"c","Names":["/web"],"Created":200,"Labels":{"dev.vmdock.domains":"app.vmdock.localhost"},
		 "Ports":[{"PrivatePort":80,"Type":"tcp"},{"PrivatePort":443,"Type":"tcp"}],"NetworkSettings":{"Networks":{"bridge":{"IPAddress":"172.17.0.2"}}}}]`)
	// "idle" has no docker socket: not running, not listed
	if out, err := run("start", "-p", "ctrd", "--runtime", "containerd"); err != nil {
		t.Fatalf("start ctrd: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(home, "ctrd", "containerd.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	out, err := run("domains", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var l domainsList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]string{}
	for _, r := range l.Routes {
		got[r.Name] = fmt.Sprintf("%s/%s:%d", r.Profile, r.Container, r.Port)
	}
	want := map[string]string{
		"web.vmdock.localhost":        "default/web:8080",
		"shop-api-1.vmdock.localhost": "default/shop-api-1:80",
		"api.shop.vmdock.localhost":   "default/shop-api-1:80",
		"web.dev.vmdock.localhost":    "dev/web:0",
		"front.vmdock.localhost":      "default/front:3000",
		"app.vmdock.localhost":        "default/front:3000", // the newer container's label wins
	}
	if len(got) != len(want) {
		t.Errorf("names %v, want %v", got, want)
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s → %s, want %s", n, got[n], w)
		}
	}
	if !strings.Contains(l.Skipped["ctrd"], "containerd runtime: its names are listed only by a running router") {
		t.Errorf("skipped %v, want the containerd profile named with why", l.Skipped)
	}
	if len(l.Conflicts) != 1 || l.Conflicts[0].Name != "app.vmdock.localhost" || l.Conflicts[0].Losers[0].Container != "shop-api-1" {
		t.Errorf("conflicts %+v", l.Conflicts)
	}

	out, err = run("domains")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"web.dev.vmdock.localhost", "several TCP ports (80, 443)",
		"conflict: app.vmdock.localhost goes to front (label, profile default), not shop-api-1 (label, profile default)",
		`"app.vmdock.localhost" is not accepted in profile dev`} {
		if !strings.Contains(out, s) {
			t.Errorf("domains printed:\n%s\nwant %q", out, s)
		}
	}
	if !strings.Contains(out, "no router is running") {
		t.Errorf("domains printed:\n%s\nwant a word that no router runs", out)
	}
	if strings.Contains(out, "idle") {
		t.Errorf("a profile that is not running was listed:\n%s", out)
	}
}

func TestDomainsWithNothingRunning(t *testing.T) {
	env(t)
	out, err := run("domains")
	if err != nil || !strings.Contains(out, "no container names") {
		t.Errorf("%v\n%s", err, out)
	}
}

type fakeTrust struct {
	cert string
	adds int
}

func (f *fakeTrust) Add(context.Context) error { f.adds++; return nil }

func TestDomainsCAAndTrust(t *testing.T) {
	home, _ := env(t)
	out, err := run("domains", "ca")
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimSpace(out)
	if path != localca.Path(home) {
		t.Errorf("ca printed %q, want %s", path, localca.Path(home))
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the CA was not made on first use: %v", err)
	}
	if fi, err := os.Stat(home); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the vmdock home made by `domains ca`: %v, %v; want mode 0700", fi.Mode(), err)
	}
	ca, err := localca.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	if c := ca.Certificate(); len(c.PermittedDNSDomains) != 1 || c.PermittedDNSDomains[0] != domains.Suffix {
		t.Errorf("CA permits %v", c.PermittedDNSDomains)
	}

	f := &fakeTrust{}
	saved := newTrust
	t.Cleanup(func() { newTrust = saved })
	newTrust = func(cert string, _ io.Writer) (trustAdder, error) { f.cert = cert; return f, nil }
	if out, err := run("domains", "trust"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if f.adds != 1 || f.cert != path {
		t.Errorf("trust added %d times with %q, want once with %s", f.adds, f.cert, path)
	}
}

func TestDomainsAsksTheRouterFirst(t *testing.T) {
	home, _ := env(t)
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(home, domains.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	asked := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		asked <- line
		l := domains.Build("dev", []domains.Container{{ID: "x", Name: "api", IP: "10.0.0.9"}}).Listing()
		l.Listening = []string{"http://127.0.0.1:80"}
		json.NewEncoder(c).Encode(l) //nolint:errcheck
	}()
	out, err := run("domains")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if q := <-asked; q != "{\"list\":true}\n" {
		t.Errorf("asked the router %q", q)
	}
	if !strings.Contains(out, "router: http://127.0.0.1:80") || !strings.Contains(out, "api.dev.vmdock.localhost") {
		t.Errorf("domains printed:\n%s\nwant the router's address and its names", out)
	}
}
