package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHTTP(t *testing.T) {
	t.Setenv("VMDOCK_TEST_MARK", "here")
	srv := httptest.NewServer(newHandler())
	defer srv.Close()

	tests := []struct {
		path     string
		status   int
		contains string
		exact    bool
	}{
		{"/", http.StatusOK, okBody, true},
		{"/env", http.StatusOK, "VMDOCK_TEST_MARK=here\n", false},
		{"/nope", http.StatusNotFound, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.exact && string(body) != tt.contains {
				t.Fatalf("body = %q, want %q", body, tt.contains)
			}
			if !strings.Contains(string(body), tt.contains) {
				t.Fatalf("body = %q, want it to contain %q", body, tt.contains)
			}
		})
	}
}

func TestUDPEcho(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serveUDP(pc) }()

	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	for _, msg := range []string{"ping", strings.Repeat("x", 1400)} {
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2048)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if string(buf[:n]) != msg {
			t.Fatalf("echo = %q, want %q", buf[:n], msg)
		}
	}
	pc.Close()
	if err := <-done; err != nil {
		t.Fatalf("serveUDP after close = %v, want nil", err)
	}
}

func TestTCPEcho(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serveTCP(ln) }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "hello vmdock\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if line != "hello vmdock\n" {
		t.Fatalf("echo = %q", line)
	}
	ln.Close()
	if err := <-done; err != nil {
		t.Fatalf("serveTCP after close = %v, want nil", err)
	}
}

// -inotify prints the events of the watched folder, including the
// attribute change a guest-side touch makes.
func TestWatchInotify(t *testing.T) {
	dir := t.TempDir()
	r, w := io.Pipe()
	go watchInotify(dir, w)
	lines := bufio.NewScanner(r)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "watching ") {
		t.Fatalf("first line %q", lines.Text())
	}
	f := filepath.Join(dir, "a.txt")
	os.WriteFile(f, []byte("x"), 0o644)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "a.txt ") {
		t.Fatalf("after a write: %q", lines.Text())
	}
}
