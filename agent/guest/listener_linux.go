package guest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// pollListener accepts on a nonblocking listening socket, waiting in
// poll(2) on the socket and an eventfd, so that Close wakes a blocked
// Accept at once. shutdown(2) cannot be relied on for that: a listening
// AF_VSOCK socket answers it with ENOTCONN and its accept(2) stays
// blocked, so a guest agent on vz would only stop when systemd killed it
// 10 s later. Go's poller does not take AF_VSOCK descriptors either.
type pollListener struct {
	fd, wake int
	name     string // names the accepted files
	closed   atomic.Bool
	// mu is held by Accept while it uses the descriptors; Close takes it
	// before closing them, so a descriptor number is never reused under a
	// poll still waiting on it.
	mu        sync.Mutex
	closeOnce sync.Once
	closeErr  error
}

// listen binds a stream socket of domain to sa and listens on it.
func listen(domain int, sa unix.Sockaddr, name string) (*pollListener, error) {
	fd, err := unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s socket: %w", name, err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind %s: %w", name, err)
	}
	if err := unix.Listen(fd, 4); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("listen on %s: %w", name, err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("listen on %s: eventfd: %w", name, err)
	}
	return &pollListener{fd: fd, wake: wake, name: name}, nil
}

// Accept waits for a connection and returns it as a nonblocking file
// (the Go poller serves its reads, and closing it interrupts them). After
// Close it returns net.ErrClosed.
func (l *pollListener) Accept() (*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fds := []unix.PollFd{{Fd: int32(l.wake), Events: unix.POLLIN}, {Fd: int32(l.fd), Events: unix.POLLIN}}
	for {
		if l.closed.Load() {
			return nil, net.ErrClosed
		}
		nfd, _, err := unix.Accept4(l.fd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
		switch {
		case err == nil:
			return os.NewFile(uintptr(nfd), l.name), nil
		case errors.Is(err, unix.EINTR) || errors.Is(err, unix.ECONNABORTED):
			continue
		case !errors.Is(err, unix.EAGAIN):
			return nil, fmt.Errorf("accept on %s: %w", l.name, err)
		}
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return nil, fmt.Errorf("accept on %s: poll: %w", l.name, err)
		}
	}
}

// Close ends a blocked Accept and then closes the socket; it returns once
// that Accept has returned.
func (l *pollListener) Close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		// Only a counter at its maximum refuses this write, and Close
		// writes once.
		if _, err := unix.Write(l.wake, one[:]); err != nil {
			l.closeErr = fmt.Errorf("close %s: wake accept: %w", l.name, err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.closeErr = errors.Join(l.closeErr, unix.Close(l.fd), unix.Close(l.wake))
	})
	return l.closeErr
}
