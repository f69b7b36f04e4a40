// Command echo-server is the process of the vmdock-test container image: it
// gives the end-to-end tests one thing to reach per protocol. HTTP on :80
// answers "GET /" with "vmdock-test-ok\n" and "GET /env" with the
// environment, UDP on :81 echoes datagrams, TCP on :82 echoes the stream.
// With -inotify DIR it is a file watcher instead, like a dev server in a
// container: it prints one line per inotify event in DIR (not recursive).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"
)

// okBody is what the tests look for on port 80.
const okBody = "vmdock-test-ok\n"

func main() {
	httpAddr := flag.String("http", ":80", "HTTP listen address")
	udpAddr := flag.String("udp", ":81", "UDP echo listen address")
	tcpAddr := flag.String("tcp", ":82", "TCP echo listen address")
	inotifyDir := flag.String("inotify", "", "watch this folder and print its inotify events (instead of serving)")
	flag.Parse()

	if *inotifyDir != "" {
		if err := watchInotify(*inotifyDir, os.Stdout); err != nil {
			slog.Error("echo-server -inotify", "err", err)
			os.Exit(1)
		}
		return
	}

	if err := run(*httpAddr, *udpAddr, *tcpAddr); err != nil {
		slog.Error("echo-server", "err", err)
		os.Exit(1)
	}
}

func run(httpAddr, udpAddr, tcpAddr string) error {
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return fmt.Errorf("listen http %s: %w", httpAddr, err)
	}
	pc, err := net.ListenPacket("udp", udpAddr)
	if err != nil {
		return fmt.Errorf("listen udp %s: %w", udpAddr, err)
	}
	tl, err := net.Listen("tcp", tcpAddr)
	if err != nil {
		return fmt.Errorf("listen tcp %s: %w", tcpAddr, err)
	}
	slog.Info("echo-server listening", "http", hl.Addr(), "udp", pc.LocalAddr(), "tcp", tl.Addr())

	errc := make(chan error, 3)
	go func() {
		srv := &http.Server{Handler: newHandler(), ReadHeaderTimeout: 10 * time.Second}
		errc <- fmt.Errorf("serve http: %w", srv.Serve(hl))
	}()
	go func() { errc <- serveUDP(pc) }()
	go func() { errc <- serveTCP(tl) }()
	return <-errc
}

func newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, okBody)
	})
	mux.HandleFunc("GET /env", func(w http.ResponseWriter, _ *http.Request) {
		env := os.Environ()
		sort.Strings(env)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, strings.Join(env, "\n")+"\n")
	})
	return mux
}

// serveUDP echoes every datagram back to its sender until pc is closed.
func serveUDP(pc net.PacketConn) error {
	buf := make([]byte, 64*1024)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("udp read: %w", err)
		}
		if _, err := pc.WriteTo(buf[:n], addr); err != nil {
			slog.Warn("udp echo", "to", addr, "err", err)
		}
	}
}

// serveTCP echoes each connection's bytes back until the peer closes it.
func serveTCP(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("tcp accept: %w", err)
		}
		go func() {
			defer c.Close()
			io.Copy(c, c)
		}()
	}
}
