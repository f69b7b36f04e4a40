package hostagent

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// containerd speaks gRPC, which is HTTP/2: an HTTP/2 server answers the
// ping the same way.
func TestWaitGRPCServer(t *testing.T) {
	dir := shortdir.New(t)
	h2 := filepath.Join(dir, "h2.sock")
	ln, err := net.Listen("unix", h2)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go (&http2.Server{}).ServeConn(c, &http2.ServeConnOpts{Handler: http.NotFoundHandler()})
		}
	}()
	if err := waitGRPCServer(context.Background(), h2, 5*time.Second); err != nil {
		t.Errorf("HTTP/2 server: %v", err)
	}

	h1 := filepath.Join(dir, "h1.sock")
	ln1, err := net.Listen("unix", h1)
	if err != nil {
		t.Fatal(err)
	}
	defer ln1.Close()
	go http.Serve(ln1, http.NotFoundHandler())
	err = waitGRPCServer(context.Background(), h1, 1200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "containerd did not answer on "+h1) {
		t.Errorf("HTTP/1 server: %v", err)
	}
	if err := waitGRPCServer(context.Background(), filepath.Join(dir, "none.sock"), 600*time.Millisecond); err == nil {
		t.Error("no server: answered")
	}
}

func TestRuntimeSteps(t *testing.T) {
	ha := &hostAgent{}
	for rt, want := range map[string]string{"docker": "docker docker-ping", "containerd": "containerd containerd-ping"} {
		ha.cfg.Runtime = rt
		var names []string
		for _, s := range ha.bootSteps() {
			if strings.HasPrefix(s.name, rt) {
				names = append(names, s.name)
			}
		}
		if got := strings.Join(names, " "); got != want {
			t.Errorf("%s: steps %q, want %q", rt, got, want)
		}
	}
}
