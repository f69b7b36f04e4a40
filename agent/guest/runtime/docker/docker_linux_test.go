package docker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent/guest/runtime"
	"github.com/vmdock/vmdock/internal/shortdir"
)

func TestDaemonJSONDNS(t *testing.T) {
	readDNS := func(t *testing.T, s *Engine) any {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(s.Root, DaemonJSON))
		must(t, err)
		var cfg map[string]any
		must(t, json.Unmarshal(b, &cfg))
		return cfg["dns"]
	}
	s, _ := newTestServer(t)
	cfg := runtime.Config{HostAccessIP: "10.254.254.254"}
	must(t, os.MkdirAll(filepath.Join(s.Root, "etc/docker"), 0o755))

	// No server: a user's own dns is kept.
	must(t, os.WriteFile(filepath.Join(s.Root, DaemonJSON), []byte(`{"dns":["9.9.9.9"]}`), 0o644))
	must(t, s.writeDaemonJSON(cfg))
	if got := readDNS(t, s); !slices.Equal(got.([]any), []any{"9.9.9.9"}) {
		t.Fatalf("user dns = %v, want kept", got)
	}
	// Server running: containers use it.
	cfg.DNSIP = "10.254.254.254"
	must(t, s.writeDaemonJSON(cfg))
	if got := readDNS(t, s); !slices.Equal(got.([]any), []any{"10.254.254.254"}) {
		t.Fatalf("dns = %v, want [10.254.254.254]", got)
	}
	// Server gone (say, port 53 was taken this boot): our stale entry goes.
	cfg.DNSIP = ""
	must(t, s.writeDaemonJSON(cfg))
	if got := readDNS(t, s); got != nil {
		t.Fatalf("dns = %v, want it removed", got)
	}
}

func TestStartDocker(t *testing.T) {
	s, fos := newTestServer(t)
	sock := filepath.Join(shortdir.New(t), "docker.sock")
	s.Socket = sock
	// A reserve that cannot be freed is only logged.
	reserveAsked := 0
	s.ReleaseReserve = func() (bool, error) { reserveAsked++; return false, errors.New("reserve: permission denied") }
	must(t, os.MkdirAll(filepath.Join(s.Root, "etc/docker"), 0o755))
	must(t, os.WriteFile(filepath.Join(s.Root, DaemonJSON), []byte(`{"log-driver":"local"}`), 0o644))
	go func() {
		// dockerd comes up a little after systemctl returns.
		time.Sleep(300 * time.Millisecond)
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { l.Close() })
		http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/_ping" {
				io.WriteString(w, "OK")
				return
			}
			http.NotFound(w, r)
		}))
	}()
	must(t, s.Start(context.Background(), runtime.Config{HostAccessIP: "10.254.254.254"}))
	if !strings.Contains(fos.Ran(), "systemctl start --job-mode=ignore-dependencies containerd docker.socket\nsystemctl start --job-mode=ignore-dependencies docker.service") {
		t.Fatalf("commands: %s", fos.Ran())
	}
	if reserveAsked != 1 {
		t.Errorf("reserve asked %d times before the start, want once", reserveAsked)
	}
	if b, _ := os.ReadFile(filepath.Join(s.Root, runtime.ContainerdConfig)); string(b) != runtime.ContainerdConfigText {
		t.Errorf("containerd started without its configuration: %q", b)
	}
	b, _ := os.ReadFile(filepath.Join(s.Root, DaemonJSON))
	if !strings.Contains(string(b), `"host-gateway-ip": "10.254.254.254"`) || !strings.Contains(string(b), `"log-driver": "local"`) {
		t.Fatalf("daemon.json = %s", b)
	}
}
