package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/disks"
)

// Run serves the host forever over the channel in cfg, reopening it
// whenever a session ends (host agent restarted). It returns only when ctx
// ends or the channel cannot be used at all. Beside it runs the idle upkeep
// (upkeep_linux.go).
func (s *Server) Run(ctx context.Context, cfg agent.GuestConfig) error {
	go s.rooms().disks.RunUpkeep(ctx, disks.UpkeepEvery)
	switch cfg.Channel {
	case agent.ChannelVirtioSerial:
		return s.runSerial(ctx, cfg.Serial())
	case agent.ChannelVsock:
		return s.runVsock(ctx, cfg.Port())
	}
	return fmt.Errorf("channel %q is not %q or %q", cfg.Channel, agent.ChannelVirtioSerial, agent.ChannelVsock)
}

// retryDelay paces reopen and wait-for-host loops: slow enough not to spin
// a core, quick enough that a reconnect feels instant.
const retryDelay = 250 * time.Millisecond

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func (s *Server) runSerial(ctx context.Context, dev string) error {
	for {
		f, err := s.openPort(dev)
		if err != nil {
			s.log().Debug("open agent port", "dev", dev, "err", err)
			if err := sleepCtx(ctx, time.Second); err != nil {
				return err
			}
			continue
		}
		announce(f, s.log())
		s.log().Info("waiting for the host", "dev", dev)
		err = s.serve(ctx, waitHostReader{ctx: ctx, r: f}, f)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			s.log().Info("session failed", "err", err)
		}
		if err := sleepCtx(ctx, retryDelay); err != nil {
			return err
		}
	}
}

// portLinks is where udev links virtio-serial ports by name.
const portLinks = "/dev/virtio-ports"

// openPort opens the agent's virtio-serial port. The agent starts before
// udev's coldplug, so udev's link may not exist yet: a missing link is
// looked up by the port's name in sysfs, which names the port as soon as
// the kernel has it (the /dev node itself is devtmpfs's, no udev needed).
func (s *Server) openPort(dev string) (*os.File, error) {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || path.Dir(dev) != portLinks {
		return f, err
	}
	node, ok := s.portByName(path.Base(dev))
	if !ok {
		return nil, err
	}
	return os.OpenFile(s.path(node), os.O_RDWR, 0)
}

// portByName is the /dev node of the virtio-serial port called name.
func (s *Server) portByName(name string) (string, bool) {
	des, err := os.ReadDir(s.path("/sys/class/virtio-ports"))
	if err != nil {
		return "", false
	}
	for _, de := range des {
		b, err := os.ReadFile(s.path(path.Join("/sys/class/virtio-ports", de.Name(), "name")))
		if err == nil && strings.TrimSpace(string(b)) == name {
			return "/dev/" + de.Name(), true
		}
	}
	return "", false
}

// announce writes agent.RestartLine if a host is connected, without
// waiting long for one: a host that connects later starts a fresh
// handshake anyway. It ends a host session the previous agent left behind.
//
// Right after open the port may not know yet that the host is connected
// (QEMU tells the guest asynchronously), and a nonblocking write then says
// EAGAIN. Losing the line leaves the old host session to die by keepalive,
// 30 s later, so EAGAIN is retried for a short while.
func announce(f *os.File, log *slog.Logger) {
	rc, err := f.SyscallConn()
	if err != nil {
		log.Debug("announce to the host", "err", err)
		return
	}
	msg := restartAnnouncement()
	deadline := time.Now().Add(announceRetryFor)
	for len(msg) > 0 {
		var n int
		var werr error
		// The descriptor is nonblocking (Go's poller holds it): one write
		// per attempt, which may take only part of msg.
		err = rc.Write(func(fd uintptr) bool {
			n, werr = unix.Write(int(fd), msg)
			return true
		})
		if err == nil {
			err = werr
		}
		if n > 0 {
			msg = msg[n:]
		}
		if err != nil && !errors.Is(err, unix.EAGAIN) || time.Now().After(deadline) {
			break
		}
		if errors.Is(err, unix.EAGAIN) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err != nil || len(msg) > 0 {
		log.Info("announce to the host: incomplete; an old host session ends by keepalive", "err", err, "left", len(msg))
	}
}

// restartAnnouncement is agent.RestartLine after a run of newlines longer
// than any yamux frame. The previous agent may have died between a frame's
// header and its body: the host's session then reads what follows as that
// body, and a bare RestartLine would vanish into it, leaving the stale
// session to its keepalive (about 30 s). The newlines complete any such
// frame; the first one read as a header is not a yamux version, so the
// stale session fails at once. A host in its handshake skips empty lines.
func restartAnnouncement() []byte {
	pad := bytes.Repeat([]byte{'\n'}, agent.MaxFrameSize)
	return append(pad, agent.RestartLine+"\n"...)
}

// announceRetryFor bounds the EAGAIN retries of announce; with no host
// connected at all it only delays the agent's start by this much.
var announceRetryFor = time.Second

// waitHostReader is used only for the handshake. A virtio-serial port reads
// 0 bytes (EOF) while no host is connected, and poll reports POLLHUP at
// once, so there is no event to block on: wait a little and read again.
type waitHostReader struct {
	ctx context.Context
	r   io.Reader
}

func (w waitHostReader) Read(p []byte) (int, error) {
	for {
		n, err := w.r.Read(p)
		if n > 0 || !errors.Is(err, io.EOF) {
			return n, err
		}
		if err := sleepCtx(w.ctx, retryDelay); err != nil {
			return 0, err
		}
	}
}

func (s *Server) runVsock(ctx context.Context, port uint32) error {
	l, err := listen(unix.AF_VSOCK, &unix.SockaddrVM{CID: unix.VMADDR_CID_ANY, Port: port}, fmt.Sprintf("vsock port %d", port))
	if err != nil {
		return err
	}
	s.log().Info("listening", "vsock-port", port)
	return s.acceptLoop(ctx, l)
}

// acceptLoop serves every connection l accepts, each in its own session,
// until ctx ends; it closes l.
func (s *Server) acceptLoop(ctx context.Context, l *pollListener) error {
	defer l.Close()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		go func() {
			if err := s.Serve(ctx, c); err != nil && ctx.Err() == nil {
				s.log().Info("session failed", "err", err)
			}
		}()
	}
}
