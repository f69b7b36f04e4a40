package router

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestPlainServerOnSeveralListeners: the host agent serves one plain
// server on 127.0.0.1 and ::1. Serve's HTTP/2 setup used to give that
// server a TLSConfig, so whichever listener Serve reached second was
// served as TLS without a certificate and failed at once.
func TestPlainServerOnSeveralListeners(t *testing.T) {
	srv := New().Server(nil)
	var lns []net.Listener
	for i := 0; i < 4; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
	}
	errs := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errs <- Serve(srv, ln) }()
	}
	defer func() {
		srv.Close()
		for range lns {
			if err := <-errs; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	}()
	for _, ln := range lns {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatalf("%s: %v", ln.Addr(), err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want the unknown-name page", ln.Addr(), resp.StatusCode)
		}
	}
}
