// Package probe holds the measurements that run on both sides of the VM:
// the host runner calls them directly and the guest helper
// (hack/bench/helper) calls the same code, so host and guest numbers come
// from one implementation.
package probe

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// DialFunc opens one connection to the echo server under test.
type DialFunc func(ctx context.Context) (net.Conn, error)

// TCPDialer dials addr over TCP.
func TCPDialer(addr string) DialFunc {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// ServeEcho echoes every connection accepted on ln until ln is closed.
func ServeEcho(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

// EchoLatency runs conns workers in parallel; each does rounds of
// connect + write size bytes + read them back + close, and the time of each
// round is one sample. Connect is included on purpose: it is what a client
// of a forwarded port pays per request.
func EchoLatency(ctx context.Context, dial DialFunc, conns, rounds, size int) ([]time.Duration, error) {
	if conns < 1 || rounds < 1 || size < 1 {
		return nil, fmt.Errorf("echo latency: conns, rounds and size must be >= 1 (got %d, %d, %d)", conns, rounds, size)
	}
	var (
		mu       sync.Mutex
		samples  = make([]time.Duration, 0, conns*rounds)
		firstErr error
		wg       sync.WaitGroup
	)
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, size)
			for r := 0; r < rounds; r++ {
				start := time.Now()
				err := echoOnce(ctx, dial, payload, buf)
				d := time.Since(start)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				samples = append(samples, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return samples, fmt.Errorf("echo latency: %w", firstErr)
	}
	return samples, nil
}

func echoOnce(ctx context.Context, dial DialFunc, payload, buf []byte) error {
	c, err := dial(ctx)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write(payload); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	return nil
}

// EchoThroughput streams n bytes to an echo server on one connection and
// reads them back concurrently; it returns the time until the last byte
// came back. The bytes cross the path twice, so callers report 2*n.
func EchoThroughput(ctx context.Context, dial DialFunc, n int64) (time.Duration, error) {
	c, err := dial(ctx)
	if err != nil {
		return 0, fmt.Errorf("echo throughput: dial: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		chunk := make([]byte, 64<<10)
		left := n
		for left > 0 {
			k := int64(len(chunk))
			if left < k {
				k = left
			}
			if _, err := c.Write(chunk[:k]); err != nil {
				werr <- err
				return
			}
			left -= k
		}
		werr <- nil
	}()
	got, err := io.CopyN(io.Discard, c, n)
	if err != nil {
		return 0, fmt.Errorf("echo throughput: read back %d of %d bytes: %w", got, n, err)
	}
	d := time.Since(start)
	if err := <-werr; err != nil {
		return 0, fmt.Errorf("echo throughput: write: %w", err)
	}
	return d, nil
}

// HTTPLatency times n sequential GETs of url with client (which decides the
// transport, e.g. a unix socket). Keep-alive stays on: a Docker client
// reuses its connection too.
func HTTPLatency(ctx context.Context, client *http.Client, url string, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", url, err)
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return out, fmt.Errorf("GET %s: %w", url, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return out, fmt.Errorf("GET %s: status %s", url, resp.Status)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// UnixHTTPClient talks HTTP to the server on the unix socket sock.
func UnixHTTPClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// Download GETs url and reads the whole body, returning how many bytes
// came and how long from the request to the last byte.
func Download(ctx context.Context, url string) (int64, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("download %s: %w", url, err)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("download %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("download %s: %s", url, resp.Status)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return n, 0, fmt.Errorf("download %s: after %d bytes: %w", url, n, err)
	}
	return n, time.Since(start), nil
}
