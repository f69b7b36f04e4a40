package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/internal/shortdir"
)

func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go ServeEcho(ln)
	return ln.Addr().String()
}

func TestEchoLatency(t *testing.T) {
	addr := echoServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct{ conns, rounds, size, want int }{
		{1, 5, 1, 5},
		{8, 3, 4096, 24},
	} {
		got, err := EchoLatency(ctx, TCPDialer(addr), tc.conns, tc.rounds, tc.size)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if len(got) != tc.want {
			t.Errorf("%+v: %d samples, want %d", tc, len(got), tc.want)
		}
	}
	if _, err := EchoLatency(ctx, TCPDialer(addr), 0, 1, 1); err == nil {
		t.Error("conns=0 accepted")
	}
}

func TestEchoLatencyDialError(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if _, err := EchoLatency(context.Background(), TCPDialer(addr), 2, 2, 8); err == nil {
		t.Fatal("closed port: want an error")
	}
}

func TestEchoThroughput(t *testing.T) {
	addr := echoServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := EchoThroughput(ctx, TCPDialer(addr), 3<<20+7)
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 {
		t.Errorf("duration %v", d)
	}
}

func TestEchoThroughputShortServer(t *testing.T) {
	// A server that closes early must be an error, not a fast result.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			buf := make([]byte, 10)
			c.Read(buf)
			c.Write(buf)
			c.Close()
		}
	}()
	if _, err := EchoThroughput(context.Background(), TCPDialer(ln.Addr().String()), 1<<20); err == nil {
		t.Fatal("want an error")
	}
}

func TestHTTPLatencyUnix(t *testing.T) {
	sock := filepath.Join(shortdir.New(t), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/_ping" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("OK"))
	}))
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	c := UnixHTTPClient(sock)
	got, err := HTTPLatency(context.Background(), c, "http://docker/_ping", 4)
	if err != nil || len(got) != 4 {
		t.Fatalf("got %d samples, err %v", len(got), err)
	}
	if _, err := HTTPLatency(context.Background(), c, "http://docker/nope", 1); err == nil {
		t.Error("404 accepted")
	}
}

func TestTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tree")
	got, err := Tree(dir, 55, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Files != 55 || got.Bytes < 55*100 || got.Bytes > 55*20<<10 {
		t.Errorf("files %d bytes %d", got.Files, got.Bytes)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("tree not deleted: %v", err)
	}
	again, _ := Tree(dir, 55, 1)
	if again.Bytes != got.Bytes {
		t.Errorf("same seed, different sizes: %d vs %d", again.Bytes, got.Bytes)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Tree(dir, 5, 1); err == nil {
		t.Error("existing dir accepted")
	}
	if _, err := Tree(filepath.Join(t.TempDir(), "x"), 0, 1); err == nil {
		t.Error("n=0 accepted")
	}
}

// Each transaction is record, flush, marker, flush: a flush skipped or
// moved would change what the row measures.
func TestCommitLoopOrder(t *testing.T) {
	var ops []string
	w := writerFunc(func(b []byte) (int, error) {
		ops = append(ops, fmt.Sprintf("w%d", len(b)))
		return len(b), nil
	})
	if err := commitLoop(w, 3, func() error { ops = append(ops, "s"); return nil }); err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("w512 s w64 s ", 3)
	if got := strings.Join(ops, " ") + " "; got != want {
		t.Errorf("ops = %q, want %q", got, want)
	}
	failing := errors.New("disk gone")
	err := commitLoop(w, 3, func() error { return failing })
	if !errors.Is(err, failing) || !strings.Contains(err.Error(), "transaction 0") {
		t.Errorf("commitLoop with a failing flush = %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestCommitsCleansUpAndRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	d, err := Commits(dir, 20)
	if err != nil || d <= 0 {
		t.Fatalf("Commits = %v, %v", d, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	// A log already there is not ours to append to or remove.
	existing := filepath.Join(dir, "commits.log")
	if err := os.WriteFile(existing, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Commits(dir, 3); err == nil {
		t.Error("Commits over an existing log did not fail")
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Errorf("existing log changed to %q", b)
	}
	if _, err := Commits(dir, 0); err == nil {
		t.Error("Commits(0) did not fail")
	}
	if _, err := Commits(filepath.Join(dir, "missing"), 1); err == nil {
		t.Error("Commits in a missing folder did not fail")
	}
}

func TestTreePhasesOneByOne(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tree")
	for _, phase := range TreePhases {
		if _, err := TreePhase(dir, 30, 2, phase); err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		if phase == PhaseCreate {
			// A file changed between phases (as a broken sync would) fails the read.
			if err := os.WriteFile(treeFile(dir, 3, 3), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := TreePhase(dir, 30, 2, PhaseRead); err == nil || !strings.Contains(err.Error(), "has 1 bytes") {
				t.Errorf("read of a changed tree: %v", err)
			}
			for _, redo := range []string{PhaseDelete, PhaseCreate} {
				if _, err := TreePhase(dir, 30, 2, redo); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if _, err := TreePhase(dir, 30, 2, "bogus"); err == nil || !strings.Contains(err.Error(), "accepted: create, walk, read, delete") {
		t.Errorf("bad phase: %v", err)
	}
}
