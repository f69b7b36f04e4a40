package router

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/network/domains"
	"github.com/vmdock/vmdock/network/domains/localca"
)

func TestHTTPSWithHTTP2AndSNI(t *testing.T) {
	ca, err := localca.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := &guest{addrs: map[string]string{}}
	backend(t, g, "172.17.0.2:80", echo("web"))
	backend(t, g, "172.17.0.3:80", echo("api"))
	r := New()
	r.Register("default", g.dial)
	r.SetTable("default", domains.Build("default", []domains.Container{ //nolint:errcheck
		{ID: "1", Name: "web", IP: "172.17.0.2"}, {ID: "2", Name: "api", IP: "172.17.0.3"},
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := r.Server(ca.GetCertificate)
	go Serve(srv, ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })

	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	addr := ln.Addr().String()
	// every name dials the router's one port, as a browser would
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, n, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, n, addr)
		},
	}
	c := &http.Client{Transport: tr}
	resp, err := c.Get("https://web.vmdock.localhost/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || !strings.HasPrefix(string(body), "web host=web.vmdock.localhost ") || !strings.Contains(string(body), "proto=https ") {
		t.Errorf("%s %q, want HTTP/2 to web with X-Forwarded-Proto https", resp.Proto, body)
	}

	// a Host that differs from the connection's SNI name is refused
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "web.vmdock.localhost", RootCAs: roots, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: api.vmdock.localhost\r\n\r\n") //nolint:errcheck
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host api over web's connection: %s, want 421", resp.Status)
	}
}

// Only names the router holds, or held a moment ago, get a certificate:
// a handshake for any other name ends with unrecognized_name and signs
// nothing; plain HTTP for such a name still gets the 404 page.
func TestHTTPSOnlyForNamesTheRouterHolds(t *testing.T) {
	ca, err := localca.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := &guest{addrs: map[string]string{}}
	backend(t, g, "172.17.0.2:80", echo("web"))
	r := New()
	now := time.Now()
	r.now = func() time.Time { return now }
	r.Register("default", g.dial)
	web := []domains.Container{{ID: "1", Name: "web", IP: "172.17.0.2"}}
	r.SetTable("default", domains.Build("default", web)) //nolint:errcheck
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := r.Server(ca.GetCertificate)
	go Serve(srv, ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	handshake := func(name string) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: name, RootCAs: roots})
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := handshake("web.vmdock.localhost"); err != nil {
		t.Fatalf("a held name: %v", err)
	}
	for _, name := range []string{"nothere.vmdock.localhost", "x" + strings.Repeat("a", 60) + ".vmdock.localhost"} {
		if err := handshake(name); err == nil || !strings.Contains(err.Error(), "unrecognized name") {
			t.Errorf("a name nobody holds (%s): %v, want the unrecognized_name alert", name, err)
		}
	}
	resp, body := get(t, &http.Client{}, frontURL(t, r), "nothere.vmdock.localhost")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "No such container name") {
		t.Errorf("plain HTTP for an unknown name: %d %q, want the 404 page", resp.StatusCode, body)
	}

	// the container goes: its name keeps its certificate for a while (a
	// restart), then loses it
	r.SetTable("default", domains.Build("default", nil)) //nolint:errcheck
	now = now.Add(recentlyHeld - time.Second)
	if err := handshake("web.vmdock.localhost"); err != nil {
		t.Errorf("a name held a moment ago: %v", err)
	}
	now = now.Add(2 * time.Second)
	if err := handshake("web.vmdock.localhost"); err == nil || !strings.Contains(err.Error(), "unrecognized name") {
		t.Errorf("a name dropped long ago: %v, want the unrecognized_name alert", err)
	}
}
