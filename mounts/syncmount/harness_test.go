package syncmount

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// syncTimeout bounds each wait for one sync step. Local cycles take
// milliseconds; Mutagen's reconnect interval (15 s) must never be needed.
const syncTimeout = 10 * time.Second

// testLog collects slog output and prints it only when the test failed.
// Mutagen goroutines may still log after the test ends, which t.Log forbids.
type testLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func newTestLogger(t *testing.T) *slog.Logger {
	l := &testLog{}
	t.Cleanup(func() {
		if t.Failed() {
			l.mu.Lock()
			t.Logf("log:\n%s", l.buf.String())
			l.mu.Unlock()
		}
	})
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// guest is the guest agent's side in the test: a yamux server that hands
// every stream to Serve, as the real agent will after its service header.
type guest struct {
	t       *testing.T
	dataDir string
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	serves  sync.WaitGroup

	mu      sync.Mutex
	client  *yamux.Session // host end of the current link
	server  *yamux.Session
	streams int
}

func newGuest(t *testing.T, dataDir string, log *slog.Logger) *guest {
	ctx, cancel := context.WithCancel(context.Background())
	g := &guest{t: t, dataDir: dataDir, log: log, ctx: ctx, cancel: cancel}
	g.connect()
	t.Cleanup(g.stop)
	return g
}

// connect builds a new link, as after an agent reconnect.
func (g *guest) connect() {
	hostEnd, guestEnd := net.Pipe()
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = nil
	cfg.Logger = slog.NewLogLogger(g.log.Handler(), slog.LevelDebug)
	client, err := yamux.Client(hostEnd, cfg)
	if err != nil {
		g.t.Fatal(err)
	}
	server, err := yamux.Server(guestEnd, cfg)
	if err != nil {
		g.t.Fatal(err)
	}
	g.mu.Lock()
	g.client, g.server = client, server
	g.mu.Unlock()
	g.serves.Add(1)
	go g.accept(server)
}

func (g *guest) accept(server *yamux.Session) {
	defer g.serves.Done()
	for {
		stream, err := server.Accept()
		if err != nil {
			return
		}
		g.mu.Lock()
		g.streams++
		g.mu.Unlock()
		g.serves.Add(1)
		go func() {
			defer g.serves.Done()
			if err := Serve(g.ctx, stream, GuestOptions{DataDir: g.dataDir, Logger: g.log}); err != nil {
				g.log.Debug("serve ended", "err", err)
			}
		}()
	}
}

// dial is the Manager's Dial: a new yamux stream on the current link.
func (g *guest) dial(ctx context.Context) (net.Conn, error) {
	g.mu.Lock()
	client := g.client
	g.mu.Unlock()
	if client == nil {
		return nil, errors.New("no link")
	}
	return client.OpenStream()
}

// breakLink kills the current link, as when the agent connection drops.
func (g *guest) breakLink() {
	g.mu.Lock()
	client, server := g.client, g.server
	g.client, g.server = nil, nil
	g.mu.Unlock()
	if client != nil {
		client.Close()
		server.Close()
	}
}

func (g *guest) streamCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.streams
}

// stop ends every Serve, so the next test may use another data directory.
func (g *guest) stop() {
	g.cancel()
	g.breakLink()
	g.serves.Wait()
}

// env is one host folder, one guest copy and a Manager between them.
type env struct {
	t       *testing.T
	dataDir string
	host    string
	guest   string
	g       *guest
	log     *slog.Logger
	m       *Manager
}

func newEnv(t *testing.T) *env {
	root := t.TempDir()
	e := &env{
		t:       t,
		dataDir: filepath.Join(root, "data"),
		host:    filepath.Join(root, "host folder"),
		guest:   filepath.Join(root, "guest", "sync", "m1"),
		log:     newTestLogger(t),
	}
	mustMkdir(t, e.host)
	mustMkdir(t, filepath.Dir(e.guest))
	// Both halves share one process here, so they share the data directory
	// (Mutagen keeps alpha and beta files apart inside it).
	e.g = newGuest(t, e.dataDir, e.log)
	e.open()
	t.Cleanup(e.close)
	return e
}

func (e *env) open() {
	e.t.Helper()
	e.openWith(Options{PollInterval: time.Second})
}

// openWith opens the Manager with opts plus the environment's data
// directory, dialer and logger.
func (e *env) openWith(opts Options) {
	e.t.Helper()
	opts.DataDir, opts.Dial, opts.Logger = e.dataDir, e.g.dial, e.log
	m, err := NewManager(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.m = m
}

func (e *env) close() {
	if e.m != nil {
		if err := e.m.Close(); err != nil {
			e.t.Error(err)
		}
		e.m = nil
	}
}

// newGuestDisk removes what lives on the guest's data disk: the copy and
// the guest's share of the common test data directory.
func (e *env) newGuestDisk() {
	e.t.Helper()
	mustRemove(e.t, e.guest)
	mustRemove(e.t, filepath.Join(e.dataDir, "vmdock-served"))
	for _, pattern := range []string{"caches/*_beta", "staging/*_beta"} {
		matches, _ := filepath.Glob(filepath.Join(e.dataDir, pattern))
		for _, m := range matches {
			mustRemove(e.t, m)
		}
	}
}

func (e *env) mount() Mount {
	return Mount{ID: "m1", HostPath: e.host, GuestPath: e.guest, UID: -1, GID: -1}
}

func (e *env) ensure(m Mount) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	if err := e.m.Ensure(ctx, m); err != nil {
		e.t.Fatal(err)
	}
	if err := e.m.WaitInitial(ctx, nil); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) flush() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	if err := e.m.Flush(ctx, "m1"); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) status() SessionStatus {
	e.t.Helper()
	st, err := e.m.Status()
	if err != nil {
		e.t.Fatal(err)
	}
	if len(st) != 1 {
		e.t.Fatalf("status lists %d sessions, want 1: %+v", len(st), st)
	}
	return st[0]
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// readFile returns the content, or "<missing>".
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantFile(t *testing.T, path, want string) {
	t.Helper()
	if got := readFile(t, path); got != want {
		t.Errorf("%s = %q, want %q", path, got, want)
	}
}

// eventually polls cond until it holds or syncTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(syncTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
