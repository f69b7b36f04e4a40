package hostagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/vmdock/vmdock/network"
	"github.com/vmdock/vmdock/vm"
)

// controlServer answers `vmdock status`, follows for `vmdock start`, and
// takes the stop request, on the instance's ha.sock.
type controlServer struct {
	mux    *http.ServeMux // for routes that need the host agent's state
	srv    *http.Server
	ln     net.Listener
	status func() vm.HostAgentStatus
	events *eventLog
	stop   func(force bool)
	// openStream opens a raw stream to the guest agent; nil until the
	// agent answered.
	openStream func(ctx context.Context) (net.Conn, error)
}

func listenControl(path string, status func() vm.HostAgentStatus, events *eventLog, stop func(force bool), openStream func(context.Context) (net.Conn, error)) (*controlServer, error) {
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	c := &controlServer{ln: ln, status: status, events: events, stop: stop, openStream: openStream}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+vm.ControlStatusPath, c.handleStatus)
	mux.HandleFunc("GET "+vm.ControlEventsPath, c.handleEvents)
	mux.HandleFunc("POST "+vm.ControlStopPath, c.handleStop)
	mux.HandleFunc("POST "+vm.ControlExecPath, c.handleAgentStream)
	c.mux = mux
	c.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go c.srv.Serve(ln)
	return c, nil
}

func (c *controlServer) handleStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(c.status())
}

func (c *controlServer) handleEvents(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	past, ch, cancel := c.events.follow()
	defer cancel()
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	send := func(ev vm.Event) bool {
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

func (c *controlServer) handleStop(w http.ResponseWriter, r *http.Request) {
	force := r.URL.Query().Get("force") == "1"
	w.WriteHeader(http.StatusAccepted)
	go c.stop(force)
}

func (c *controlServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c.srv.Shutdown(ctx)
	c.srv.Close()
}

// removeStaleSocket deletes a leftover socket file from a dead host agent,
// and refuses to touch anything that is not a socket.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket; move it away", path)
	}
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("%s is in use by another process", path)
	}
	return os.Remove(path)
}

// handleAgentStream turns the control connection into a raw stream to the
// guest agent (for `vmdock ssh`); the CLI speaks the agent protocol on it.
func (c *controlServer) handleAgentStream(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != vm.ExecUpgrade {
		http.Error(w, "expected Upgrade: "+vm.ExecUpgrade, http.StatusBadRequest)
		return
	}
	if c.openStream == nil {
		http.Error(w, "the guest agent is not connected yet", http.StatusServiceUnavailable)
		return
	}
	st, err := c.openStream(r.Context())
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
	fmt.Fprintf(buf, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", vm.ExecUpgrade)
	buf.Flush()
	go network.Pipe(conn, st)
}
