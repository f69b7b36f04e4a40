package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// StatusTimeout bounds a status request: a host agent that cannot answer
// in this time counts as broken.
const StatusTimeout = 2 * time.Second

// Client talks to one host agent's control socket.
type Client struct {
	Socket string
}

// NewClient is a client of the host agent listening on sock.
func NewClient(sock string) *Client { return &Client{Socket: sock} }

// HTTP is an HTTP client whose every request goes to the control socket,
// whatever the URL's host (for routes other packages add, see
// Server.Handle).
func (c *Client) HTTP() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", c.Socket)
		},
		DisableKeepAlives: true,
	}}
}

func (c *Client) do(ctx context.Context, method, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://hostagent"+path, nil)
	if err != nil {
		return nil, err
	}
	return c.HTTP().Do(req)
}

// Status asks the host agent for its status, within StatusTimeout.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	ctx, cancel := context.WithTimeout(ctx, StatusTimeout)
	defer cancel()
	resp, err := c.do(ctx, http.MethodGet, StatusPath)
	if err != nil {
		return nil, fmt.Errorf("query host agent: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("query host agent: %s", resp.Status)
	}
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("decode host agent status: %w", err)
	}
	return &st, nil
}

// Stop asks the host agent to shut the instance down and returns once it
// took the request.
func (c *Client) Stop(ctx context.Context, req StopRequest) error {
	path := StopPath
	switch {
	case req.Force:
		path += "?force=1"
	case req.NoSave:
		path += "?nosave=1"
	}
	resp, err := c.do(ctx, http.MethodPost, path)
	if err != nil {
		return fmt.Errorf("ask host agent to stop: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("ask host agent to stop: %s", resp.Status)
	}
	return nil
}

// SyncFlush asks for a full sync cycle of the sync mount at hostPath
// (every sync mount when empty) and returns when it completed.
func (c *Client) SyncFlush(ctx context.Context, hostPath string) error {
	return c.syncAction(ctx, SyncFlushPath, hostPath)
}

// SyncReset forgets the sync history of the sync mount at hostPath: the
// next cycle compares both sides afresh, and differences become conflicts
// or copies, never deletions.
func (c *Client) SyncReset(ctx context.Context, hostPath string) error {
	return c.syncAction(ctx, SyncResetPath, hostPath)
}

// SyncPause stops syncing every sync mount until SyncResume (or the next
// start, or stop, which syncs once more before the guest powers off).
func (c *Client) SyncPause(ctx context.Context) error { return c.syncAction(ctx, SyncPausePath, "") }

// SyncResume resumes every sync mount.
func (c *Client) SyncResume(ctx context.Context) error { return c.syncAction(ctx, SyncResumePath, "") }

// SetIdle sets the running VM's idle period (0: never pause).
func (c *Client) SetIdle(ctx context.Context, after time.Duration) error {
	return c.post(ctx, IdlePath+"?after="+url.QueryEscape(after.String()))
}

func (c *Client) syncAction(ctx context.Context, route, hostPath string) error {
	return c.post(ctx, route+"?path="+url.QueryEscape(hostPath))
}

// post sends an action with no body; a refusal comes back as the host
// agent's text.
func (c *Client) post(ctx context.Context, pathAndQuery string) error {
	resp, err := c.do(ctx, http.MethodPost, pathAndQuery)
	if err != nil {
		return fmt.Errorf("ask host agent: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return errors.New(strings.TrimSpace(string(b)))
	}
	return nil
}

// Events follows the host agent's events from its first one; the stream
// ends with ctx, with the host agent, or on Close.
func (c *Client) Events(ctx context.Context) (*EventStream, error) {
	resp, err := c.do(ctx, http.MethodGet, EventsPath)
	if err != nil {
		return nil, fmt.Errorf("follow host agent events: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("follow host agent events: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &EventStream{body: resp.Body, sc: sc}, nil
}

// EventStream reads events one at a time.
type EventStream struct {
	body io.Closer
	sc   *bufio.Scanner
}

// Next returns the next event; io.EOF when the stream ended.
func (s *EventStream) Next() (Event, error) {
	for s.sc.Scan() {
		var ev Event
		if err := json.Unmarshal(s.sc.Bytes(), &ev); err != nil {
			continue // a line from a newer host agent this client cannot read
		}
		return ev, nil
	}
	if err := s.sc.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, io.EOF
}

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }

// OpenStream upgrades a control connection to a raw stream to the guest
// agent, on which the caller speaks the agent protocol.
func (c *Client) OpenStream(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return nil, fmt.Errorf("connect to host agent: %w", err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: hostagent\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", ExecPath, ExecUpgrade)
	status, err := readHead(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if !strings.Contains(status, " 101 ") {
		conn.Close()
		return nil, fmt.Errorf("host agent refused the agent stream: %s", status)
	}
	return conn, nil
}

// readHead reads the response head byte by byte, since anything buffered
// past it belongs to the agent stream, and returns its status line.
func readHead(conn net.Conn) (string, error) {
	var head bytes.Buffer
	one := make([]byte, 1)
	for !bytes.HasSuffix(head.Bytes(), []byte("\r\n\r\n")) {
		if head.Len() > 8192 {
			return "", errors.New("host agent: response head too long")
		}
		if _, err := conn.Read(one); err != nil {
			return "", fmt.Errorf("host agent agent-stream upgrade: %w", err)
		}
		head.WriteByte(one[0])
	}
	line, _, _ := strings.Cut(head.String(), "\r\n")
	return line, nil
}
