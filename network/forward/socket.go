package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// SocketForwarder serves a host unix socket and tunnels every connection
// to one guest address (the docker socket).
type SocketForwarder struct {
	path        string
	dial        DialFunc
	hold        Hold
	guestNet    string
	guestAddr   string
	log         *slog.Logger
	ln          net.Listener
	ctx         context.Context
	cancel      context.CancelFunc
	conns       *connSet
	wg          sync.WaitGroup
	closeOnce   sync.Once
	dialTimeout time.Duration
}

// ListenSocket creates the socket at path (mode 0600) and starts tunnelling
// connections to guestNet/guestAddr through dial. A stale socket file left
// by a crashed host agent is replaced; any other kind of file is not.
func ListenSocket(path, guestNet, guestAddr string, dial DialFunc) (*SocketForwarder, error) {
	return ListenSocketHeld(path, guestNet, guestAddr, dial, nil)
}

// ListenSocketHeld is ListenSocket with every connection held as a use
// of the VM (nil: none).
func ListenSocketHeld(path, guestNet, guestAddr string, dial DialFunc, hold Hold) (*SocketForwarder, error) {
	if dial == nil {
		return nil, fmt.Errorf("listen on %s: no dial function", path)
	}
	log := slog.Default()
	ln, err := ListenUnix(path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &SocketForwarder{
		path: path, dial: dial, hold: hold, guestNet: guestNet, guestAddr: guestAddr,
		log: log.With("socket", path, "guest", guestNet+" "+guestAddr),
		ln:  ln, ctx: ctx, cancel: cancel, conns: newConnSet(),
		dialTimeout: 30 * time.Second,
	}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// ListenUnix listens on a private (mode 0600) unix socket at path. A stale
// socket file left by a crashed process is replaced; any other kind of
// file, or a socket somebody still answers on, is not.
func ListenUnix(path string) (net.Listener, error) {
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// The instance folder is 0700, so the short window before chmod does not
	// expose the socket; chmod keeps it private when the folder is not.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("restrict %s to mode 0600: %w", path, err)
	}
	return ln, nil
}

// removeStaleSocket clears path for a new listener. It refuses to delete a
// file that is not a socket, or a socket somebody still answers on.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("refusing to replace %s: it exists and is not a socket (mode %s)", path, fi.Mode())
	}
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("socket %s is in use by another process", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// Path is the host socket path.
func (f *SocketForwarder) Path() string { return f.path }

func (f *SocketForwarder) serve() {
	defer f.wg.Done()
	err := serveAccept(f.ln, f.log, func(c net.Conn) bool {
		if !f.conns.add(c) {
			c.Close()
			return false
		}
		f.wg.Add(1)
		go f.tunnel(c)
		return true
	})
	if err != nil && f.ctx.Err() == nil {
		f.log.Error("socket forwarder stopped accepting", "err", err)
	}
}

func (f *SocketForwarder) tunnel(c net.Conn) {
	defer f.wg.Done()
	defer f.conns.remove(c)
	err := dialAndPipe(f.ctx, c, f.conns, f.dialTimeout, f.hold, func(ctx context.Context) (net.Conn, error) {
		return f.dial(ctx, f.guestNet, f.guestAddr)
	})
	if err != nil {
		f.log.Warn("dial guest", "err", err)
	}
}

// Close stops listening, removes the socket file, ends every tunnel and
// waits for their goroutines.
func (f *SocketForwarder) Close() error {
	var err error
	f.closeOnce.Do(func() {
		f.cancel()
		err = f.ln.Close() // also unlinks the socket file
		f.conns.closeAll()
		f.wg.Wait()
	})
	if err != nil {
		return fmt.Errorf("close %s: %w", f.path, err)
	}
	return nil
}

// connSet tracks live conns so Close can end them; after closeAll it
// refuses new ones, which closes the race with a tunnel still dialling.
type connSet struct {
	mu     sync.Mutex
	m      map[net.Conn]struct{}
	closed bool
}

func newConnSet() *connSet { return &connSet{m: map[net.Conn]struct{}{}} }

func (s *connSet) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.m[c] = struct{}{}
	return true
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := make([]net.Conn, 0, len(s.m))
	for c := range s.m {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
