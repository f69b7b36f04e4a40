package scratch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// serve runs h on a unix socket, as the host agent's control socket does,
// and returns a client for it.
func serve(t *testing.T, h http.Handler) Client {
	t.Helper()
	dir := shortdir.New(t) // unix socket paths are short
	sock := filepath.Join(dir, "ha.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return Client{HTTP: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}}
}

type machine struct {
	calls []string
	err   error
}

func (m *machine) AttachScratch(_ context.Context, slot int, sync string) (string, error) {
	m.calls = append(m.calls, fmt.Sprintf("attach %d %s", slot, sync))
	return fmt.Sprintf("vmdock-scratch%d", slot), m.err
}

func (m *machine) DetachScratch(_ context.Context, slot int) error {
	m.calls = append(m.calls, fmt.Sprintf("detach %d", slot))
	return m.err
}

func mux(machine func() any) http.Handler {
	m := http.NewServeMux()
	m.Handle("POST "+Path, Handler(machine))
	return m
}

func TestAttachAndDetachReachTheMachine(t *testing.T) {
	m := &machine{}
	c := serve(t, mux(func() any { return m }))
	ctx := context.Background()
	serial, err := c.Attach(ctx, 2, "full")
	if err != nil || serial != "vmdock-scratch2" {
		t.Fatalf("Attach = %q, %v", serial, err)
	}
	if err := c.Detach(ctx, 1); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	if got := strings.Join(m.calls, ", "); got != "attach 2 full, detach 1" {
		t.Errorf("machine calls = %q", got)
	}
}

func TestMachineErrorsComeBackWithTheirText(t *testing.T) {
	m := &machine{err: errors.New(`disk sync "x": accepted values are full, fsync and none`)}
	c := serve(t, mux(func() any { return m }))
	_, err := c.Attach(context.Background(), 0, "x")
	if err == nil || !strings.Contains(err.Error(), `attach scratch disk 0 (disk-sync x): disk sync "x": accepted`) {
		t.Errorf("Attach = %v", err)
	}
}

func TestUnsupportedMachines(t *testing.T) {
	ctx := context.Background()
	// vz's machine has no scratch methods.
	c := serve(t, mux(func() any { return struct{}{} }))
	if _, err := c.Attach(ctx, 0, "none"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Attach on a machine without hot-plug = %v", err)
	}
	// A host agent from before the route answers 404.
	c = serve(t, http.NewServeMux())
	_, err := c.Attach(ctx, 0, "none")
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "restart the instance") {
		t.Errorf("Attach on an old host agent = %v", err)
	}
	// No VM yet (booting) or any more.
	c = serve(t, mux(func() any { return nil }))
	if err := c.Detach(ctx, 0); err == nil || !strings.Contains(err.Error(), "the VM is not running") {
		t.Errorf("Detach without a VM = %v", err)
	}
}

func TestHandlerRefusesBadRequests(t *testing.T) {
	m := &machine{}
	c := serve(t, mux(func() any { return m }))
	resp, err := c.HTTP.Post("http://x"+Path, "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || len(m.calls) != 0 {
		t.Errorf("bad JSON: status %d, calls %q", resp.StatusCode, m.calls)
	}
}
