package hostagent

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/internal/connpipe"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
)

// maxSSHAgentStreams bounds the guest-opened SSH agent streams relayed
// at once. The guest agent has its own cap, but a guest is not trusted to
// keep it: each stream holds a connection to the host's agent.
const maxSSHAgentStreams = 64

// sshAgentForward is the host's SSH agent that the guest's
// agent.GuestSSHAgentSocket leads to, decided once per start.
type sshAgentForward struct {
	sock string // the host's agent socket; "" when forwarding is off
	off  string // why it is off
	// asked: the config or the host asked for forwarding, so being off
	// is worth a line at start.
	asked bool
}

// resolveSSHAgent decides whether the guest is offered the host's SSH
// agent: SSH_AUTH_SOCK as this start sees it, unless sshAgent is false.
// A socket that is not there turns forwarding off; the VM works without
// it.
func resolveSSHAgent(cfg config.Config, h config.Host) sshAgentForward {
	sock := cfg.SSHAgentSocket(h)
	f := sshAgentForward{asked: sock != "" || (cfg.SSHAgent != nil && *cfg.SSHAgent)}
	switch {
	case cfg.SSHAgent != nil && !*cfg.SSHAgent:
		f.off = "sshAgent is false"
		return f
	case sock == "":
		f.off = "SSH_AUTH_SOCK is not set"
		return f
	case !filepath.IsAbs(sock):
		// The host agent runs in the instance folder: a relative path
		// would name another file there.
		f.off = fmt.Sprintf("SSH_AUTH_SOCK %q is not an absolute path", sock)
		return f
	}
	fi, err := os.Stat(sock)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.off = fmt.Sprintf("SSH_AUTH_SOCK %s does not exist", sock)
	case err != nil:
		f.off = fmt.Sprintf("SSH_AUTH_SOCK %s: %v", sock, errors.Unwrap(err))
	case fi.Mode().Type() != fs.ModeSocket:
		f.off = fmt.Sprintf("SSH_AUTH_SOCK %s is not a socket", sock)
	default:
		f.sock = sock
	}
	return f
}

// startSSHAgent resolves the forwarding for this run and says in one line
// when it was asked for but cannot be.
func (ha *hostAgent) startSSHAgent() {
	ha.sshAgent = resolveSSHAgent(ha.cfg, ha.opts.Host)
	switch {
	case ha.sshAgent.sock != "":
		slog.Info("SSH agent forwarding", "host", ha.sshAgent.sock, "guest", agent.GuestSSHAgentSocket)
	case ha.sshAgent.asked:
		note := "SSH agent forwarding is off: " + ha.sshAgent.off
		slog.Warn(note)
		ha.events.Emit("ssh-agent", control.EventNote, "", note)
	}
}

// status is the forwarding as `vmdock status` shows it.
func (f sshAgentForward) status() *control.SSHAgentStatus {
	if f.sock == "" {
		return &control.SSHAgentStatus{Off: f.off}
	}
	return &control.SSHAgentStatus{On: true, HostSocket: f.sock, GuestSocket: agent.GuestSSHAgentSocket}
}

// relaySSHAgentCapped relays conn unless maxSSHAgentStreams are open.
func (ha *hostAgent) relaySSHAgentCapped(conn net.Conn) {
	if ha.sshAgentOpen.Add(1) > maxSSHAgentStreams {
		ha.sshAgentOpen.Add(-1)
		_ = agent.Reply(conn, fmt.Errorf("SSH agent forwarding: the limit of %d open connections is reached", maxSSHAgentStreams))
		return
	}
	defer ha.sshAgentOpen.Add(-1)
	relaySSHAgent(conn, ha.sshAgent.sock)
}

// relaySSHAgent carries one connection the guest opened on its agent
// socket to the host's agent at sock ("" when forwarding is off).
func relaySSHAgent(conn net.Conn, sock string) {
	if sock == "" {
		_ = agent.Reply(conn, errors.New("SSH agent forwarding is off"))
		return
	}
	target, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		slog.Debug("SSH agent dial", "err", err)
		_ = agent.Reply(conn, fmt.Errorf("the host's SSH agent: %w", err))
		return
	}
	if err := agent.Reply(conn, nil); err != nil {
		target.Close()
		return
	}
	connpipe.Pipe(connpipe.CloseIsCloseWrite(conn), target)
}
