package router

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/network/domains"
)

// shortIdle makes the router's idle timeout short for one test.
func shortIdle(t *testing.T, d time.Duration) {
	saved := idleTimeout
	idleTimeout = d
	t.Cleanup(func() { idleTimeout = saved })
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	shortIdle(t, 200*time.Millisecond)
	base := frontURL(t, New())
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: nothing.vmdock.localhost\r\n\r\n") //nolint:errcheck
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck
	resp.Body.Close()
	// the keep-alive connection now sits idle: the router must hang up
	conn.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("idle keep-alive connection: read %v, want the router to close it (EOF)", err)
	}
}

func TestOversizedHeadersAreRefused(t *testing.T) {
	base := frontURL(t, New())
	req, _ := http.NewRequest("GET", base+"/", nil)
	req.Host = "web.vmdock.localhost"
	req.Header.Set("X-Big", strings.Repeat("a", 200<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("200 KiB of headers: %s, want 431", resp.Status)
	}
}

// An event stream that goes quiet for longer than the idle timeout is a
// request in progress, not an idle connection: it must stay open.
func TestLongGapsInAStreamSurvive(t *testing.T) {
	shortIdle(t, 100*time.Millisecond)
	g := &guest{addrs: map[string]string{}}
	backend(t, g, "172.17.0.2:80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n") //nolint:errcheck
		w.(http.Flusher).Flush()
		time.Sleep(500 * time.Millisecond)
		io.WriteString(w, "data: two\n\n") //nolint:errcheck
	}))
	r := New()
	r.Register("default", g.dial)
	r.SetTable("default", domains.Build("default", []domains.Container{{ID: "1", Name: "web", IP: "172.17.0.2"}})) //nolint:errcheck
	resp, body := get(t, &http.Client{}, frontURL(t, r), "web.vmdock.localhost")
	if resp.StatusCode != 200 || body != "data: one\n\ndata: two\n\n" {
		t.Errorf("event stream with a gap: %d %q, want both events", resp.StatusCode, body)
	}
}

// A WebSocket quiet for longer than the idle timeout stays open: after the
// upgrade the connection is the container's, not an idle keep-alive.
func TestWebSocketQuietLongerThanTheIdleTimeout(t *testing.T) {
	shortIdle(t, 100*time.Millisecond)
	g := &guest{addrs: map[string]string{}}
	wsEchoBackend(t, g, "172.17.0.2:80")
	r := New()
	r.Register("default", g.dial)
	r.SetTable("default", domains.Build("default", []domains.Container{{ID: "1", Name: "ws", IP: "172.17.0.2"}})) //nolint:errcheck
	conn, err := net.Dial("tcp", strings.TrimPrefix(frontURL(t, r), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: ws.vmdock.localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	for _, msg := range []string{"hello\n", "after a quiet spell\n"} {
		fmt.Fprint(conn, msg)
		if line, err := br.ReadString('\n'); err != nil || line != "echo "+msg {
			t.Fatalf("%q %v, want echo %q", line, err, msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
