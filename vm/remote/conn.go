package remote

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HelperOptions are the helper's arguments: what it serves on the server.
type HelperOptions struct {
	SHA256    string // the installed helper's hash
	HostPorts []int  // laptop ports offered at the docker bridge gateway
	LogLevel  string // debug, info, ...; empty: info
	// SyncKey names the instance's sync state on the server
	// (~/.cache/vmdock/sync/<key>); empty: no sync mounts.
	SyncKey string
}

// Dial starts the helper over ssh and returns its stdin and stdout as one
// connection, the agent protocol's channel; closing it ends ssh. ctx bounds
// only the start: the session lives until Close or a lost link.
func (s Server) Dial(ctx context.Context, o HelperOptions) (net.Conn, error) {
	args := []string{HelperPath(o.SHA256), o.SHA256, "--socket", s.Socket}
	for _, p := range o.HostPorts {
		args = append(args, "--host-port", strconv.Itoa(p))
	}
	if o.LogLevel != "" {
		args = append(args, "--log-level", o.LogLevel)
	}
	if o.SyncKey != "" {
		args = append(args, "--sync-key", o.SyncKey)
	}
	cmd := s.command(context.Background(), helperScript, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &tailWriter{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ssh: %w", err)
	}
	c := &sessionConn{r: stdout, w: stdin, cmd: cmd, stderr: stderr, server: s, exited: make(chan struct{})}
	go c.wait()
	return c, nil
}

// sessionConn is one ssh process as a net.Conn. Deadlines are not kept:
// the agent protocol bounds its waits with its own keepalive.
type sessionConn struct {
	r      io.ReadCloser
	w      io.WriteCloser
	cmd    *exec.Cmd
	stderr *tailWriter
	server Server
	once   sync.Once
	closed atomic.Bool // Close was called: the end is no failure
	exited chan struct{}
	err    error // why ssh ended, set before exited closes
}

func (c *sessionConn) wait() {
	err := c.cmd.Wait()
	if err != nil {
		c.err = c.server.explain(err, c.stderr.String())
	} else {
		c.err = fmt.Errorf("%s: the helper's session ended", c.server.Target)
	}
	if c.closed.Load() {
		slog.Debug("ssh session closed", "server", c.server.Target.String())
	} else {
		slog.Info("ssh session ended", "server", c.server.Target.String(), "err", c.err)
	}
	close(c.exited)
}

// Read returns ssh's one-line cause once the stream is done, so a failed
// handshake says why (refused key, no route) rather than EOF.
func (c *sessionConn) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if err != nil && n == 0 {
		select {
		case <-c.exited:
			return 0, c.err
		case <-time.After(2 * time.Second):
		}
	}
	return n, err
}

func (c *sessionConn) Write(b []byte) (int, error) { return c.w.Write(b) }

func (c *sessionConn) Close() error {
	c.once.Do(func() {
		c.closed.Store(true)
		c.w.Close()
		if c.cmd.Process != nil {
			c.cmd.Process.Kill()
		}
	})
	return nil
}

func (c *sessionConn) LocalAddr() net.Addr              { return sshAddr("local") }
func (c *sessionConn) RemoteAddr() net.Addr             { return sshAddr(c.server.Target.String()) }
func (c *sessionConn) SetDeadline(time.Time) error      { return nil }
func (c *sessionConn) SetReadDeadline(time.Time) error  { return nil }
func (c *sessionConn) SetWriteDeadline(time.Time) error { return nil }

type sshAddr string

func (a sshAddr) Network() string { return "ssh" }
func (a sshAddr) String() string  { return string(a) }

// tailWriter keeps the last few KiB of ssh's stderr for its error.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line != "" {
			slog.Info("server", "ssh", line)
		}
	}
	return len(b), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
