package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/network/domains"
	"github.com/vmdock/vmdock/vm/control"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// fakeAgentStreams is ha.sock's exec upgrade in front of a guest agent
// that takes dial requests: to "10.0.0.2:80" it answers and echoes, any
// other address it refuses.
func fakeAgentStreams(t *testing.T) string {
	t.Helper()
	dir := shortdir.New(t) // unix socket paths are short
	sock := filepath.Join(dir, "ha.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil || req.URL.Path != control.ExecPath || req.Header.Get("Upgrade") != control.ExecUpgrade {
					fmt.Fprint(c, "HTTP/1.1 400 Bad Request\r\n\r\n")
					return
				}
				fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", control.ExecUpgrade)
				var ar agent.Request
				if err := agent.ReadJSONLine(br, &ar); err != nil {
					return
				}
				if ar.Op != agent.OpDial || ar.Network != "tcp" || ar.Address != "10.0.0.2:80" {
					agent.Reply(c, fmt.Errorf("dial %s %s: connection refused", ar.Network, ar.Address)) //nolint:errcheck
					return
				}
				agent.Reply(c, nil) //nolint:errcheck
				io.Copy(c, br)      //nolint:errcheck
			}()
		}
	}()
	return sock
}

func TestBenchDialGuest(t *testing.T) {
	dial := benchDialGuest(control.NewClient(fakeAgentStreams(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(ctx, "10.0.0.2:80")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "GET / HTTP/1.1\r\n" {
		t.Fatalf("%q %v: the stream after the dial is not the container's", buf, err)
	}
	if _, err := dial(ctx, "10.0.0.3:80"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("refused dial: err = %v", err)
	}
}

func TestBenchDialGuestNoHostAgent(t *testing.T) {
	dial := benchDialGuest(control.NewClient(filepath.Join(t.TempDir(), "none.sock")))
	if _, err := dial(context.Background(), "10.0.0.2:80"); err == nil || !strings.Contains(err.Error(), "host agent") {
		t.Errorf("err = %v", err)
	}
}

func TestRouteOf(t *testing.T) {
	l := domainsList{
		Routes: []domains.Route{
			{Name: "web.other.vmdock.localhost", Profile: "other", ContainerID: "abc123", Source: domains.FromContainerName, Addr: "172.17.0.9:80"},
			{Name: "site.vmdock.localhost", Profile: "default", ContainerID: "abc123", Source: domains.FromLabel, Addr: "172.17.0.2:80"},
			{Name: "web.vmdock.localhost", Profile: "default", ContainerID: "abc123", Source: domains.FromContainerName, Port: 80, Addr: "172.17.0.2:80"},
		},
		Listening: []string{"http://[::1]:18080", "http://127.0.0.1:18080", "https://127.0.0.1:18443"},
	}
	rt, ok, err := routeOf(l, "default", "abc123def456")
	if err != nil || !ok {
		t.Fatalf("%v %v", ok, err)
	}
	if rt.Name != "web.vmdock.localhost" || rt.GuestAddr != "172.17.0.2:80" || rt.HTTPAddr != "127.0.0.1:18080" {
		t.Errorf("route %+v", rt)
	}
	if _, ok, _ := routeOf(l, "default", "fff"); ok {
		t.Error("a route for another container")
	}
	l.Listening = []string{"https://127.0.0.1:18443"}
	if rt, ok, _ := routeOf(l, "default", "abc"); !ok || rt.HTTPAddr != "" {
		t.Errorf("no http listener: %+v %v", rt, ok)
	}
}
