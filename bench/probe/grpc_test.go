package probe

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// fakeGRPC answers unary calls like a gRPC server: status in the trailer.
func fakeGRPC(t *testing.T, status string) string {
	sock := filepath.Join(shortdir.New(t), "grpc.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/grpc" || r.URL.Path != "/containerd.services.version.v1.Version/Version" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Trailer", "Grpc-Status")
		w.Header().Set("Content-Type", "application/grpc")
		w.Write([]byte{0, 0, 0, 0, 0})
		w.Header().Set("Grpc-Status", status)
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go (&http2.Server{}).ServeConn(c, &http2.ServeConnOpts{Handler: h})
		}
	}()
	return sock
}

func TestGRPCLatency(t *testing.T) {
	lat, err := GRPCLatency(context.Background(), fakeGRPC(t, "0"), ContainerdVersionURL, 5)
	if err != nil || len(lat) != 5 {
		t.Fatalf("%v %v", lat, err)
	}
	_, err = GRPCLatency(context.Background(), fakeGRPC(t, "12"), ContainerdVersionURL, 1)
	if err == nil || !strings.Contains(err.Error(), `grpc-status "12"`) {
		t.Errorf("failing call: %v", err)
	}
}
