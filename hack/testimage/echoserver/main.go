// Command echo-server is the process of the vmdock-test container image: it
// gives the end-to-end tests one thing to reach per protocol. HTTP on :80
// answers "GET /" with "vmdock-test-ok\n" and "GET /env" with the
// environment, UDP on :81 echoes datagrams, TCP on :82 echoes the stream.
// For the container-domains router it also has a page for a browser
// (/page), the request as the server saw it (/request), a WebSocket echo
// (/ws), an upload answered with its sha256 (/upload) and server-sent
// events (/events).
// With -inotify DIR it is a file watcher instead, like a dev server in a
// container: it prints one line per inotify event in DIR (not recursive).
package main

import (
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/websocket"
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
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		proto := r.Header.Get("X-Forwarded-Proto")
		if proto == "" {
			proto = "http"
		}
		fmt.Fprintf(w, pageHTML, html.EscapeString(proto+"://"+r.Host))
	})
	mux.HandleFunc("GET /request", serveRequest)
	// a websocket.Server without Handshake takes any Origin: clients
	// behind the router come from other names
	mux.Handle("GET /ws", websocket.Server{Handler: func(ws *websocket.Conn) { io.Copy(ws, ws) }})
	mux.HandleFunc("POST /upload", serveUpload)
	mux.HandleFunc("GET /events", serveEvents)
	return mux
}

// pageHTML is what a browser shows; the tests look for pageText.
const (
	pageText = "vmdock container domains work"
	pageHTML = "<!doctype html><html><head><title>vmdock-test</title></head>" +
		"<body style=\"font: 32px sans-serif\"><h1>" + pageText + "</h1><p>%s</p></body></html>\n"
)

// serveRequest writes the request line and headers as received, so a
// test sees what a proxy in front changed.
func serveRequest(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "%s %s %s\nHost: %s\n", r.Method, r.URL.RequestURI(), r.Proto, r.Host)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
	}
}

// serveUpload answers with the body's size and sha256.
func serveUpload(w http.ResponseWriter, r *http.Request) {
	h := sha256.New()
	n, err := io.Copy(h, r.Body)
	if err != nil {
		http.Error(w, "read upload: "+err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "%d %x\n", n, h.Sum(nil))
}

// serveEvents sends ?n= server-sent events (default 3) ?gap= apart
// (default 500ms), each flushed at once, so a test can see the first
// arrive before the response ends.
func serveEvents(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	if err != nil || n < 1 || n > 1000 {
		n = 3
	}
	gap, err := time.ParseDuration(r.URL.Query().Get("gap"))
	if err != nil || gap < 0 || gap > time.Minute {
		gap = 500 * time.Millisecond
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	for i := 1; i <= n; i++ {
		if i > 1 {
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintf(w, "data: event %d\n\n", i)
		if fl != nil {
			fl.Flush()
		}
	}
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
