package exec

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
)

// execClient runs exec requests on a Runner through a socket pair, as the
// host does on a stream of the agent channel (which, like a socket, buffers
// what is written).
type execClient struct{ r *Runner }

func (c execClient) Exec(ctx context.Context, req agent.ExecRequest, stdin io.Reader, stdout, stderr io.Writer, resize <-chan [2]uint16) (int, error) {
	host, guest, err := socketPair()
	if err != nil {
		return -1, err
	}
	defer host.Close()
	go func() {
		var r agent.Request
		if err := agent.ReadJSONLine(guest, &r); err != nil {
			guest.Close()
			return
		}
		c.r.Serve(context.Background(), guest, r)
	}()
	return agent.ExecStream(ctx, host, req, stdin, stdout, stderr, resize)
}

func socketPair() (net.Conn, net.Conn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "exec-stream")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			return nil, nil, err
		}
		conns[i] = c
	}
	return conns[0], conns[1], nil
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestExec(t *testing.T) {
	c := execClient{&Runner{}}
	tests := []struct {
		name       string
		req        agent.ExecRequest
		stdin      string
		wantOut    string
		wantErrOut string
		wantCode   int
	}{
		{"stdout stderr exit", agent.ExecRequest{Argv: []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}}, "", "out\n", "err\n", 3},
		{"stdin to cat", agent.ExecRequest{Argv: []string{"/bin/cat"}}, "hello\n", "hello\n", "", 0},
		{"env", agent.ExecRequest{Argv: []string{"/bin/sh", "-c", "echo $FOO"}, Env: map[string]string{"FOO": "bar"}}, "", "bar\n", "", 0},
		{"tty", agent.ExecRequest{Argv: []string{"/bin/sh", "-c", "test -t 0 && stty size; exit 4"}, TTY: true, Rows: 33, Cols: 77}, "", "33 77", "", 4},
		{"dir", agent.ExecRequest{Argv: []string{"/bin/pwd"}, Dir: "/usr/bin"}, "", "/usr/bin\n", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code, err := c.Exec(ctx(t), tt.req, strings.NewReader(tt.stdin), &out, &errOut, nil)
			if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || !strings.Contains(out.String(), tt.wantOut) || errOut.String() != tt.wantErrOut {
				t.Fatalf("code %d out %q err %q; want %d %q %q", code, out.String(), errOut.String(), tt.wantCode, tt.wantOut, tt.wantErrOut)
			}
		})
	}
	if _, err := c.Exec(ctx(t), agent.ExecRequest{Argv: []string{"/no/such/binary"}}, nil, nil, nil, nil); err == nil {
		t.Fatal("exec of a missing binary: want an error")
	}
	if _, err := c.Exec(ctx(t), agent.ExecRequest{Argv: []string{"/bin/pwd"}, Dir: "/no/such/dir"}, nil, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "working folder /no/such/dir is not a folder in the guest") {
		t.Fatalf("exec in a missing folder: %v", err)
	}
}

func TestExecResizeAndCancel(t *testing.T) {
	c := execClient{&Runner{}}
	resize := make(chan [2]uint16, 1)
	pr, pw := io.Pipe()
	defer pw.Close()
	var out syncBuf
	done := make(chan int, 1)
	go func() {
		code, _ := c.Exec(ctx(t), agent.ExecRequest{Argv: []string{"/bin/sh"}, TTY: true, Rows: 10, Cols: 10}, pr, &out, nil, resize)
		done <- code
	}()
	resize <- [2]uint16{50, 132}
	time.Sleep(300 * time.Millisecond)
	io.WriteString(pw, "stty size; exit 7\n")
	select {
	case code := <-done:
		if code != 7 || !strings.Contains(out.String(), "50 132") {
			t.Fatalf("code %d, out %q", code, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("interactive shell did not exit")
	}

	cctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := c.Exec(cctx, agent.ExecRequest{Argv: []string{"/bin/sleep", "30"}}, nil, nil, nil, nil)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled exec: %v after %v", err, time.Since(start))
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// A command gets the proxy the daemons use under its own environment.
func TestExecGetsTheProxy(t *testing.T) {
	c := execClient{&Runner{ProxyVars: func(env map[string]string) map[string]string {
		out := map[string]string{"HTTPS_PROXY": "http://proxy.test:3128"}
		for k, v := range env {
			out[k] = v
		}
		return out
	}}}
	var out bytes.Buffer
	code, err := c.Exec(ctx(t), agent.ExecRequest{Argv: []string{"/bin/sh", "-c", "echo $HTTPS_PROXY $FOO"}, Env: map[string]string{"FOO": "bar"}}, nil, &out, nil, nil)
	if err != nil || code != 0 || out.String() != "http://proxy.test:3128 bar\n" {
		t.Fatalf("code %d, %v, out %q", code, err, out.String())
	}
}
