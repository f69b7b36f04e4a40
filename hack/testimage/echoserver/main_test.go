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

	"golang.org/x/net/websocket"
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

func TestDomainEndpoints(t *testing.T) {
	srv := httptest.NewServer(newHandler())
	defer srv.Close()
	get := func(path string, hdr ...string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if b := get("/page"); !strings.Contains(b, pageText) {
		t.Errorf("/page = %q", b)
	}
	if b := get("/request", "X-Forwarded-Proto", "https"); !strings.Contains(b, "GET /request HTTP/1.1\n") || !strings.Contains(b, "X-Forwarded-Proto: https\n") {
		t.Errorf("/request = %q", b)
	}

	resp, err := http.Post(srv.URL+"/upload", "application/octet-stream", strings.NewReader("abc"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "3 ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n"; string(b) != want {
		t.Errorf("/upload = %q, want %q", b, want)
	}

	start := time.Now()
	resp, err = http.Get(srv.URL + "/events?n=2&gap=300ms")
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	first, _ := r.ReadString('\n')
	if first != "data: event 1\n" || time.Since(start) > 250*time.Millisecond {
		t.Errorf("first event %q after %v, want it before the gap", first, time.Since(start))
	}
	rest, _ := io.ReadAll(r)
	resp.Body.Close()
	if !strings.Contains(string(rest), "data: event 2") {
		t.Errorf("rest of the events = %q", rest)
	}

	ws, err := websocket.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", "", "http://elsewhere.example")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if _, err := ws.Write([]byte("hello ws")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := ws.Read(buf)
	if err != nil || string(buf[:n]) != "hello ws" {
		t.Fatalf("ws echo = %q, %v", buf[:n], err)
	}
}
