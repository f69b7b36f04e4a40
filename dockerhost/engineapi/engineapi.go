// Package engineapi is vmdock's one Docker Engine API client: plain
// net/http over a unix socket (or any dialer), so vmdock needs no docker
// module. An answer of 400 or more is an *Error carrying the status code,
// so callers test for "not found" by code, never by matching text.
package engineapi

import (
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

// Client talks to one docker engine.
type Client struct {
	// Socket names the engine in errors: its unix socket, or what the
	// dialer reaches.
	Socket string
	hc     *http.Client
}

// New is a Client whose connections come from dial (a unix socket, the
// docker socket's host-side forward, or the agent channel); name says
// which engine in errors.
func New(name string, dial func(ctx context.Context) (net.Conn, error)) *Client {
	return &Client{Socket: name, hc: &http.Client{Transport: &http.Transport{
		DialContext:        func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableCompression: true,
		MaxIdleConns:       2,
		IdleConnTimeout:    30 * time.Second,
	}}}
}

// Unix is a Client for the engine listening on the unix socket path.
func Unix(path string) *Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return New(path, func(ctx context.Context) (net.Conn, error) {
		return dialer.DialContext(ctx, "unix", path)
	})
}

// CloseIdleConnections closes the connections kept for the next request.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Error is an engine's answer with a status of 400 or more.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("engine answered %d: %s", e.Status, e.Message)
}

// HasStatus says whether err is an engine's answer with status.
func HasStatus(err error, status int) bool {
	var ae *Error
	return errors.As(err, &ae) && ae.Status == status
}

// IsNotFound says whether err is an engine's 404.
func IsNotFound(err error) bool { return HasStatus(err, http.StatusNotFound) }

// IsConflict says whether err is an engine's 409.
func IsConflict(err error) bool { return HasStatus(err, http.StatusConflict) }

// Do sends one request and returns the answer for the caller to stream;
// the caller closes the body of a success. A status of 400 or more is an
// *Error (wrapped with the method and path).
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType string) (*http.Response, error) {
	u := "http://docker" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s on %s: %w", method, path, c.Socket, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var m struct{ Message string }
		if json.Unmarshal(b, &m) != nil || m.Message == "" {
			m.Message = strings.TrimSpace(string(b))
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, &Error{resp.StatusCode, m.Message})
	}
	return resp, nil
}

// Call sends in as JSON (when not nil) and decodes the answer into out
// (when not nil).
func (c *Client) Call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	resp, err := c.Do(ctx, method, path, query, body, ct)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, path, err)
	}
	return nil
}

// Get decodes the JSON answer to GET path into out.
func (c *Client) Get(ctx context.Context, path string, query url.Values, out any) error {
	return c.Call(ctx, http.MethodGet, path, query, nil, out)
}

// Post sends in as JSON to path and decodes the answer into out.
func (c *Client) Post(ctx context.Context, path string, query url.Values, in, out any) error {
	return c.Call(ctx, http.MethodPost, path, query, in, out)
}

// Delete sends DELETE path.
func (c *Client) Delete(ctx context.Context, path string, query url.Values) error {
	return c.Call(ctx, http.MethodDelete, path, query, nil, nil)
}

// Ping checks that the engine answers GET /_ping, within 10 s at most.
func (c *Client) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Call(ctx, http.MethodGet, "/_ping", nil, nil, nil)
}
