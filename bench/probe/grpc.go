package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/http2"
)

// ContainerdVersionURL is containerd's Version call, the cheapest unary
// RPC it serves (no namespace, no state): what `nerdctl version` and most
// clients ask first.
const ContainerdVersionURL = "http://containerd/containerd.services.version.v1.Version/Version"

// GRPCLatency times n sequential unary calls of url (an empty request
// message) on the gRPC server behind the unix socket sock, over one
// HTTP/2 connection, as a gRPC client keeps it.
func GRPCLatency(ctx context.Context, sock, url string, n int) ([]time.Duration, error) {
	tr := &http2.Transport{
		AllowHTTP: true, // h2c: gRPC over a unix socket has no TLS
		DialTLSContext: func(ctx context.Context, _, _ string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}
	defer tr.CloseIdleConnections()
	// gRPC's length-prefixed message: not compressed, 0 bytes.
	empty := []byte{0, 0, 0, 0, 0}
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(empty))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return out, fmt.Errorf("gRPC %s: %w", url, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if st := resp.Trailer.Get("Grpc-Status"); resp.StatusCode != http.StatusOK || st != "0" {
			return out, fmt.Errorf("gRPC %s: HTTP %s, grpc-status %q (%s)", url, resp.Status, st, resp.Trailer.Get("Grpc-Message"))
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}
