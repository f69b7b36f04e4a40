// Package migrate brings images, volumes and containers from another
// Docker engine (Docker Desktop, Colima, any engine on a unix socket) into
// a vmdock instance's engine, through nothing but the two engines' APIs:
// images stream from one's export to the other's load, volume contents
// travel as tar through never-started helper containers, and containers
// are created again, stopped, from their inspected configuration.
package migrate

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

// Engine is a Docker Engine API client on a unix socket: a plain
// net/http client, so vmdock needs no docker module.
type Engine struct {
	Socket string
	client *http.Client
}

// NewEngine is a client for the engine listening on socket.
func NewEngine(socket string) *Engine {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
		DisableCompression: true,
	}
	return &Engine{Socket: socket, client: &http.Client{Transport: tr}}
}

// apiError is an engine's answer with a status of 400 or more.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("engine answered %d: %s", e.Status, e.Message)
}

func isNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }
func isConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

func hasStatus(err error, status int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == status
}

// do sends one request; the caller closes the body of a success.
func (e *Engine) do(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType string) (*http.Response, error) {
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
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s on %s: %w", method, path, e.Socket, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var m struct{ Message string }
		if json.Unmarshal(b, &m) != nil || m.Message == "" {
			m.Message = strings.TrimSpace(string(b))
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, &apiError{resp.StatusCode, m.Message})
	}
	return resp, nil
}

// call sends in as JSON (when not nil) and decodes the answer into out
// (when not nil).
func (e *Engine) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	resp, err := e.do(ctx, method, path, query, body, ct)
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

// Ping checks that the engine answers.
func (e *Engine) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return e.call(ctx, http.MethodGet, "/_ping", nil, nil, nil)
}
