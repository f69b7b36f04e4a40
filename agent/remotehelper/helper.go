// Package remotehelper is the guest agent binary's remote mode: started
// over ssh on a server whose own Docker engine a remote instance uses, it
// speaks the agent protocol on its stdin and stdout (one yamux session)
// and serves what the host agent needs of the server: streams to the
// engine's socket and to published ports, the published ports as port
// events, the laptop's ports offered to containers at the docker bridge
// gateway, and the server's end of the sync mounts (sync.go).
package remotehelper

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/internal/connpipe"
)

// Options are the helper's arguments.
type Options struct {
	Socket    string // the engine's socket on the server
	HostPorts []int  // laptop ports offered at the bridge gateway
	// Cache is vmdock's folder on the server (~/.cache/vmdock): the
	// helper's binary and the sync state, never a sync mount's copy.
	Cache string
	// SyncKey names the instance's sync state under Cache (SyncDir);
	// empty: the helper serves no sync mount.
	SyncKey string
}

// Main runs the remote mode with args (those after "remote"), on the
// process's stdin and stdout.
func Main(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("remote", flag.ContinueOnError)
	socket := fs.String("socket", "/var/run/docker.sock", "the Docker engine's socket")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	syncKey := fs.String("sync-key", "", "the instance's sync state under ~/.cache/vmdock/sync (empty: no sync mounts)")
	var ports portList
	fs.Var(&ports, "host-port", "a laptop port offered to containers at the bridge gateway (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("--log-level %q: accepted: debug, info, warn or error", *level)
	}
	if *syncKey != "" && !SyncKeyPattern.MatchString(*syncKey) {
		return fmt.Errorf("--sync-key %q: accepted: %s", *syncKey, SyncKeyPattern)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("the SSH user's home folder: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	o := Options{Socket: *socket, HostPorts: ports, Cache: filepath.Join(home, ".cache", "vmdock"), SyncKey: *syncKey}
	return Serve(ctx, log, stdio{}, o)
}

// Serve answers the host agent's handshake on rwc and serves its session
// until it ends.
func Serve(ctx context.Context, log *slog.Logger, rwc io.ReadWriteCloser, o Options) error {
	if err := agent.GuestHello(rwc); err != nil {
		return err
	}
	sess, err := yamux.Server(rwc, agent.YamuxConfig(log))
	if err != nil {
		return fmt.Errorf("start session: %w", err)
	}
	defer sess.Close()
	agent.StartKeepalive(sess, agent.KeepaliveInterval, log)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	context.AfterFunc(ctx, func() { sess.Close() })
	h := &helper{log: log, opts: o, sess: sess, engine: newEngine(o.Socket)}
	if o.SyncKey != "" {
		h.sync = &syncState{dir: SyncDir(o.Cache, o.SyncKey), cache: o.Cache}
	}
	go h.offerHostPorts(ctx)
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			if errors.Is(err, io.EOF) || sess.IsClosed() {
				return nil
			}
			return err
		}
		go h.serveStream(ctx, st)
	}
}

type helper struct {
	log    *slog.Logger
	opts   Options
	sess   *yamux.Session
	engine *engine
	sync   *syncState // nil: no sync mounts
}

func (h *helper) serveStream(ctx context.Context, st net.Conn) {
	defer st.Close()
	_ = st.SetReadDeadline(time.Now().Add(30 * time.Second))
	var req agent.Request
	if err := agent.ReadJSONLine(st, &req); err != nil {
		h.log.Debug("stream without a request", "err", err)
		return
	}
	_ = st.SetReadDeadline(time.Time{})
	switch req.Op {
	case agent.OpInfo:
		info := h.info()
		_ = agent.WriteJSONLine(st, agent.Response{OK: true, Info: &info})
	case agent.OpDial:
		h.dial(ctx, st, req)
	case agent.OpWatchPorts:
		if agent.Reply(st, nil) == nil {
			h.watchPorts(ctx, st)
		}
	case agent.OpMount:
		h.prepareSync(st, req)
	case agent.OpSync:
		h.serveSync(ctx, st)
	case agent.OpSyncWatch:
		h.watchSync(ctx, st, req)
	default:
		_ = agent.Reply(st, fmt.Errorf("op %q is not served on a remote server", req.Op))
	}
}

func (h *helper) info() agent.Info {
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return agent.Info{Version: agent.Version, Arch: runtime.GOARCH, Kernel: strings.TrimSpace(string(kernel)), Hostname: host, DNSUpstreams: []string{}}
}

// dial connects to a socket or a TCP port on the server: the engine's
// socket and published ports.
func (h *helper) dial(ctx context.Context, st net.Conn, req agent.Request) {
	switch req.Network {
	case "tcp", "tcp4", "tcp6", "unix":
	default:
		_ = agent.Reply(st, fmt.Errorf("network %q is not served on a remote server; accepted: tcp or unix", req.Network))
		return
	}
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := d.DialContext(dctx, req.Network, req.Address)
	cancel()
	if err != nil {
		_ = agent.Reply(st, err)
		return
	}
	defer c.Close()
	if agent.Reply(st, nil) != nil {
		return
	}
	connpipe.Pipe(connpipe.CloseIsCloseWrite(st), c)
}

// stdio is the process's stdin and stdout as one stream.
type stdio struct{}

func (stdio) Read(b []byte) (int, error)  { return os.Stdin.Read(b) }
func (stdio) Write(b []byte) (int, error) { return os.Stdout.Write(b) }
func (stdio) Close() error {
	os.Stdin.Close()
	return os.Stdout.Close()
}

type portList []int

func (p *portList) String() string { return fmt.Sprint([]int(*p)) }
func (p *portList) Set(s string) error {
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q is not a port 1-65535", s)
	}
	*p = append(*p, n)
	return nil
}
