package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/vmdock/vmdock/internal/connpipe"
	"github.com/vmdock/vmdock/network/forward"
)

// Handlers are the host agent's answers to the API.
type Handlers struct {
	Status func() Status
	Events *EventLog
	// Stop starts the shutdown; the request returns at once.
	Stop func(StopRequest)
	// OpenStream opens a raw stream to the guest agent; nil, or an error,
	// while the guest agent is not connected.
	OpenStream func(ctx context.Context) (net.Conn, error)
	// SyncFlush and SyncReset act on the sync mount at a host path (flush:
	// every sync mount when empty); nil answers 404.
	SyncFlush func(ctx context.Context, hostPath string) error
	SyncReset func(ctx context.Context, hostPath string) error
	// SyncPause and SyncResume act on every sync mount (path is ignored).
	SyncPause  func(ctx context.Context, hostPath string) error
	SyncResume func(ctx context.Context, hostPath string) error
	// SetIdle changes the running VM's idle period (0: never pause); it
	// refuses a period config would refuse. nil answers 404.
	SetIdle func(after time.Duration) error
}

// Server serves the API on the control socket.
type Server struct {
	mux *http.ServeMux
	srv *http.Server
	h   Handlers
}

// Listen serves h on a private unix socket at path, replacing a stale
// socket a dead host agent left.
func Listen(path string, h Handlers) (*Server, error) {
	if h.Status == nil || h.Events == nil || h.Stop == nil {
		return nil, fmt.Errorf("control socket %s: Status, Events and Stop handlers are required", path)
	}
	ln, err := forward.ListenUnix(path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	s := &Server{mux: http.NewServeMux(), h: h}
	s.mux.HandleFunc("GET "+StatusPath, s.handleStatus)
	s.mux.HandleFunc("GET "+EventsPath, s.handleEvents)
	s.mux.HandleFunc("POST "+StopPath, s.handleStop)
	s.mux.HandleFunc("POST "+ExecPath, s.handleExec)
	s.mux.HandleFunc("POST "+SyncFlushPath, s.syncAction(h.SyncFlush))
	s.mux.HandleFunc("POST "+SyncResetPath, s.syncAction(h.SyncReset))
	s.mux.HandleFunc("POST "+SyncPausePath, s.syncAction(h.SyncPause))
	s.mux.HandleFunc("POST "+SyncResumePath, s.syncAction(h.SyncResume))
	s.mux.HandleFunc("POST "+IdlePath, s.handleSetIdle)
	s.mux.HandleFunc("GET "+HeapProfilePath, handleHeapProfile)
	s.mux.HandleFunc("GET "+CPUProfilePath, handleCPUProfile)
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// Handle adds a route that belongs to another package (the command line
// adds the bench's scratch disks through hostagent.Options.Routes), on the
// same socket.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Close stops serving, giving open requests up to 2 s; the events streams
// of followers end with it.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
	s.srv.Close()
}

func handleHeapProfile(w http.ResponseWriter, r *http.Request) {
	// ?debug=1 is pprof's text form, which ends with runtime.MemStats.
	debug := 0
	if r.URL.Query().Get("debug") == "1" {
		debug = 1
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	if err := pprof.Lookup("heap").WriteTo(w, debug); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func handleCPUProfile(w http.ResponseWriter, r *http.Request) {
	seconds := 10
	if q := r.URL.Query().Get("seconds"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > 60 {
			http.Error(w, fmt.Sprintf("seconds %q: accepted: a whole number from 1 to 60", q), http.StatusBadRequest)
			return
		}
		seconds = n
	}
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		http.Error(w, "cpu profile: "+err.Error(), http.StatusConflict)
		return
	}
	select {
	case <-time.After(time.Duration(seconds) * time.Second):
	case <-r.Context().Done():
	}
	pprof.StopCPUProfile()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(buf.Bytes())
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s.h.Status())
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	past, ch, cancel := s.h.Events.Follow()
	defer cancel()
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	send := func(ev Event) bool {
		if err := enc.Encode(ev); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	for _, ev := range past {
		if !send(ev) {
			return
		}
	}
	for {
		select {
		case ev := <-ch:
			if !send(ev) {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) handleStop(w http.ResponseWriter, r *http.Request) {
	req := StopRequest{Force: r.URL.Query().Get("force") == "1", NoSave: r.URL.Query().Get("nosave") == "1"}
	w.WriteHeader(http.StatusAccepted)
	go s.h.Stop(req)
}

// handleSetIdle sets the idle period from ?after=; a refusal is the
// handler's error as text.
func (s *Server) handleSetIdle(w http.ResponseWriter, r *http.Request) {
	if s.h.SetIdle == nil {
		http.Error(w, "this host agent has no idle pause", http.StatusNotFound)
		return
	}
	v := r.URL.Query().Get("after")
	after, err := time.ParseDuration(v)
	if v == "0" {
		after, err = 0, nil
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("idle %q is not a duration", v), http.StatusBadRequest)
		return
	}
	if err := s.h.SetIdle(after); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// syncAction answers a sync request with the action's error as text.
func (s *Server) syncAction(act func(context.Context, string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if act == nil {
			http.Error(w, "this instance has no sync mounts", http.StatusNotFound)
			return
		}
		if err := act(r.Context(), r.URL.Query().Get("path")); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

// handleExec turns the connection into a raw stream to the guest agent
// (for `vmdock ssh`); the CLI speaks the agent protocol on it.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != ExecUpgrade {
		http.Error(w, "expected Upgrade: "+ExecUpgrade, http.StatusBadRequest)
		return
	}
	if s.h.OpenStream == nil {
		http.Error(w, "the guest agent is not connected yet", http.StatusServiceUnavailable)
		return
	}
	st, err := s.h.OpenStream(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		st.Close()
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		st.Close()
		return
	}
	fmt.Fprintf(buf, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", ExecUpgrade)
	buf.Flush()
	go connpipe.Pipe(conn, st)
}
