package sshagent

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/internal/connpipe"
)

// maxSSHAgentConns bounds the SSH agent connections open at once. Each one
// holds a stream to the host and a connection to the host's agent, so a
// container that opens them in a loop must not be able to exhaust either.
const maxSSHAgentConns = 64

// sshAgentListener is the socket at agent.GuestSSHAgentSocket; every
// connection to it becomes an ssh-agent stream to the host.
// Relay serves the ssh-agent socket in the guest and carries each of its
// connections to the host's agent.
type Relay struct {
	guestos.Sys
	// OpenToHost opens a stream to the host on the current session.
	OpenToHost func(agent.Request) (net.Conn, error)

	mu       sync.Mutex
	listener *sshAgentListener
}

type sshAgentListener struct {
	l    *net.UnixListener
	path string
	// file is the socket file as created, to tell it from one made later
	// at the same path.
	file fs.FileInfo
	// slots holds one token per open connection.
	slots chan struct{}
	// refused is set once a refusal at the limit was logged: a container
	// that floods the socket must not flood the journal too.
	refused atomic.Bool
}

// Setup offers the host's SSH agent in the guest (on) or takes it
// away. Setup runs it on every session: a listener whose file is still in
// place is kept, one whose file went is made again, and a socket a former
// agent process left behind is replaced or removed.
func (s *Relay) Setup(on bool) error {
	p := s.Path(agent.GuestSSHAgentSocket)
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.listener; cur != nil {
		if on && cur.inPlace() {
			return nil
		}
		s.listener = nil
		cur.close()
	}
	if err := removeSocket(p); err != nil {
		return err
	}
	if !on {
		return nil
	}
	a, err := listenSSHAgent(p)
	if err != nil {
		return err
	}
	s.listener = a
	go s.serveSSHAgent(a)
	return nil
}

// listenSSHAgent makes the socket at p, usable by every user: containers
// run as whatever user their image names, and the host's agent decides
// what it signs.
func listenSSHAgent(p string) (*sshAgentListener, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("ssh agent socket folder: %w", err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("ssh agent socket: %w", err)
	}
	// close removes the file only while it is still this listener's.
	l.SetUnlinkOnClose(false)
	fail := func(err error) (*sshAgentListener, error) {
		l.Close()
		os.Remove(p)
		return nil, fmt.Errorf("ssh agent socket %s: %w", p, err)
	}
	if err := os.Chmod(p, 0o666); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return fail(err)
	}
	return &sshAgentListener{l: l, path: p, file: fi, slots: make(chan struct{}, maxSSHAgentConns)}, nil
}

// inPlace says whether the listener's socket file is still at its path.
func (a *sshAgentListener) inPlace() bool {
	fi, err := os.Lstat(a.path)
	return err == nil && os.SameFile(fi, a.file)
}

// close stops accepting and removes the socket file if it is still the
// listener's; connections already open finish on their own.
func (a *sshAgentListener) close() {
	if a.inPlace() {
		os.Remove(a.path)
	}
	a.l.Close()
}

// removeSocket removes a socket at p, and nothing else.
func removeSocket(p string) error {
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("ssh agent socket: %w", err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("ssh agent socket: %s exists and is not a socket (%s); it is left alone", p, fi.Mode().Type())
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ssh agent socket: %w", err)
	}
	return nil
}

func (s *Relay) serveSSHAgent(a *sshAgentListener) {
	for {
		c, err := a.l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors, most likely: wait instead of spinning.
			s.Logger().Warn("ssh agent: accept", "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		select {
		case a.slots <- struct{}{}:
		default:
			c.Close()
			if a.refused.CompareAndSwap(false, true) {
				s.Logger().Warn("ssh agent: a connection was refused: the limit of open connections is reached (later refusals are not logged)", "limit", maxSSHAgentConns)
			}
			continue
		}
		go func() {
			defer func() { <-a.slots }()
			s.relaySSHAgent(c)
		}()
	}
}

// relaySSHAgent carries one client connection to the host's agent.
func (s *Relay) relaySSHAgent(c net.Conn) {
	st, err := s.OpenToHost(agent.Request{Op: agent.OpSSHAgent})
	if err != nil {
		s.Logger().Info("ssh agent: the host refused the connection", "err", err)
		c.Close()
		return
	}
	connpipe.Pipe(c, connpipe.CloseIsCloseWrite(st))
}
