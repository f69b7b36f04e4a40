package forward

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/internal/shortdir"
)

func TestSocketForwarderHalfCloseRoundTrip(t *testing.T) {
	dir := shortdir.New(t)
	guestSock := filepath.Join(dir, "guest-docker.sock")
	gl, err := net.Listen("unix", guestSock)
	if err != nil {
		t.Fatal(err)
	}
	defer gl.Close()
	countServer(t, gl)

	base := runtime.NumGoroutine()
	g := newFakeGuest(t)
	hostSock := filepath.Join(dir, "docker.sock")
	f, err := ListenSocket(hostSock, "unix", guestSock, g.dial)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(hostSock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want 0600", fi.Mode().Perm())
	}

	for i := range 3 {
		c, err := net.Dial("unix", hostSock)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if err := c.(*net.UnixConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Fatalf("conn %d: %v", i, err)
		}
		if string(got) != "got 4 bytes: ping" {
			t.Fatalf("conn %d: reply %q, want %q", i, got, "got 4 bytes: ping")
		}
	}
	if d := g.dialLog(); len(d) != 3 || d[0] != "unix "+guestSock {
		t.Errorf("guest dials = %q", d)
	}

	// A connection still open at Close must be ended, not leaked.
	idle, err := net.Dial("unix", hostSock)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if !eventually(2*time.Second, func() bool { return len(g.dialLog()) == 4 }) {
		t.Fatal("idle connection never reached the guest")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(hostSock); !os.IsNotExist(err) {
		t.Errorf("socket file still there after Close: %v", err)
	}
	idle.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("open connection after Close: read err %v, want EOF", err)
	}
	if !eventually(2*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		t.Errorf("goroutines: %d after Close, %d before", runtime.NumGoroutine(), base)
	}
}

func TestSocketForwarderExistingFile(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string) (cleanup func())
		wantErr string // empty: ListenSocket succeeds
	}{
		{"none", func(t *testing.T, path string) func() { return func() {} }, ""},
		{"stale socket", func(t *testing.T, path string) func() {
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close()
			return func() {}
		}, ""},
		{"regular file", func(t *testing.T, path string) func() {
			if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
				t.Fatal(err)
			}
			return func() {
				if b, _ := os.ReadFile(path); string(b) != "keep me" {
					t.Errorf("regular file was modified: %q", b)
				}
			}
		}, "not a socket"},
		{"live socket", func(t *testing.T, path string) func() {
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			return func() { ln.Close() }
		}, "in use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(shortdir.New(t), "docker.sock")
			check := tt.prepare(t, path)
			defer check()
			f, err := ListenSocket(path, "unix", "/nowhere", newFakeGuest(t).dial)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ListenSocket: %v", err)
				}
				f.Close()
				return
			}
			if err == nil {
				f.Close()
				t.Fatalf("ListenSocket succeeded, want error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestSocketForwarderGuestDialFails(t *testing.T) {
	path := filepath.Join(shortdir.New(t), "docker.sock")
	f, err := ListenSocket(path, "unix", filepath.Join(shortdir.New(t), "absent.sock"), newFakeGuest(t).dial)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after failed guest dial: %v, want EOF", err)
	}
}
