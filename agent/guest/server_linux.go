package guest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/binfmt"
	"github.com/vmdock/vmdock/agent/guest/corpnet"
	"github.com/vmdock/vmdock/agent/guest/disks"
	"github.com/vmdock/vmdock/agent/guest/dnsforward"
	"github.com/vmdock/vmdock/agent/guest/exec"
	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/agent/guest/hostaccess"
	"github.com/vmdock/vmdock/agent/guest/idle"
	"github.com/vmdock/vmdock/agent/guest/ports"
	"github.com/vmdock/vmdock/agent/guest/runtime"
	"github.com/vmdock/vmdock/agent/guest/runtime/containerd"
	"github.com/vmdock/vmdock/agent/guest/runtime/docker"
	"github.com/vmdock/vmdock/agent/guest/shares"
	"github.com/vmdock/vmdock/agent/guest/sshagent"
)

// Server answers the host. One Server lives as long as the agent process;
// sessions come and go with the host agent.
type Server struct {
	Log *slog.Logger
	OS  guestos.OS
	// Root prefixes the files the server edits (/etc, /run, /proc/self/
	// mountinfo, binfmt_misc); "" means the real root. Tests use a temp dir.
	Root string
	// DockerSocket is where dockerd answers; default /var/run/docker.sock.
	DockerSocket string
	// The port watch's periods (see ports.Poll): PortPoll while the host
	// is busy with the guest, that is for PortPollBusy after its last
	// stream or a change, and PortPollIdle otherwise.
	PortPoll, PortPollBusy, PortPollIdle time.Duration
	// ProcNet is the folder with tcp, tcp6, udp, udp6; default /proc/net.
	ProcNet string

	mu        sync.Mutex
	sess      *yamux.Session
	keepalive *agent.Keepalive // the current session's

	// The features, made on first use from Log, OS, Root, DockerSocket,
	// the port watch's periods and ProcNet (later changes to those do not
	// reach them); each has its own lock.
	featuresOnce sync.Once
	features     features
}

// features are the server's rooms, one job each.
type features struct {
	dns    *dnsforward.Forwarder
	corp   *corpnet.CorpNet
	disks  *disks.Disks
	binfmt *binfmt.Handlers
	ssh    *sshagent.Relay
	docker *docker.Engine
	ctrd   *containerd.Engine
	shares *shares.Shares
	exec   *exec.Runner
	host   *hostaccess.HostAccess
	ports  *ports.Watch
}

// rooms returns the features, made on first use.
func (s *Server) rooms() *features {
	s.featuresOnce.Do(func() {
		sys := s.sys()
		corp := &corpnet.CorpNet{Sys: sys}
		disk := &disks.Disks{Sys: sys}
		dns := &dnsforward.Forwarder{Sys: sys}
		watch := &ports.Watch{Sys: sys, ProcNet: s.ProcNet, Poll: ports.Poll{Fast: s.PortPoll, Busy: s.PortPollBusy, Idle: s.PortPollIdle}}
		s.features = features{
			dns:    dns,
			corp:   corp,
			disks:  disk,
			binfmt: &binfmt.Handlers{Sys: sys},
			ssh:    &sshagent.Relay{Sys: sys, OpenToHost: s.openToHost},
			docker: &docker.Engine{Sys: sys, Socket: s.DockerSocket, ReleaseReserve: disk.ReleaseReserveIfFull},
			ctrd:   &containerd.Engine{Sys: sys, ReleaseReserve: disk.ReleaseReserveIfFull, UnitsStarted: watch.PublishDNAT},
			shares: &shares.Shares{Sys: sys},
			exec:   &exec.Runner{ProxyVars: corp.WithProxyVars},
			host:   &hostaccess.HostAccess{Sys: sys, OpenToHost: s.openToHost, HideOwnPort: watch.HideOwnPort, DNS: dns},
			ports:  watch,
		}
	})
	return &s.features
}

// NewServer returns a server on the real system.
func NewServer(log *slog.Logger) *Server {
	return &Server{Log: log, OS: guestos.RealOS{}}
}

func (s *Server) path(p string) string {
	if s.Root == "" {
		return p
	}
	return filepath.Join(s.Root, p)
}

// sys is the system the server's features work on.
func (s *Server) sys() guestos.Sys {
	return guestos.Sys{Log: s.Log, OS: s.OS, Root: s.Root}
}

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// Serve does the guest half of the handshake on rwc, then answers streams
// until the session ends. It closes rwc.
func (s *Server) Serve(ctx context.Context, rwc io.ReadWriteCloser) error {
	return s.serve(ctx, rwc, rwc)
}

// serve reads the handshake from hello (which may wait out a missing host)
// and runs yamux on rwc.
func (s *Server) serve(ctx context.Context, hello io.Reader, rwc io.ReadWriteCloser) error {
	defer rwc.Close()
	stop := context.AfterFunc(ctx, func() { rwc.Close() })
	defer stop()
	if err := agent.GuestHello(struct {
		io.Reader
		io.Writer
	}{hello, rwc}); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	sess, err := yamux.Server(rwc, agent.YamuxConfig(s.log()))
	if err != nil {
		return fmt.Errorf("start agent session: %w", err)
	}
	defer sess.Close()
	keepalive := agent.StartKeepalive(sess, agent.KeepaliveInterval, s.log())
	s.mu.Lock()
	s.sess = sess
	s.keepalive = keepalive
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.sess == sess {
			s.sess = nil
		}
		s.mu.Unlock()
	}()
	s.log().Info("host connected")
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			s.log().Info("host session ended", "err", err)
			return nil
		}
		s.rooms().ports.NoteHostActivity()
		// Quiesce suspended the pings for the pause; any request after
		// it comes from a VM running again.
		keepalive.Resume()
		go s.handle(ctx, st)
	}
}

// openToHost opens a stream to the host on the current session.
func (s *Server) openToHost(req agent.Request) (net.Conn, error) {
	s.mu.Lock()
	sess := s.sess
	s.mu.Unlock()
	if sess == nil {
		return nil, errors.New("no host session")
	}
	st, err := sess.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("open stream to host: %w", err)
	}
	if err := agent.WriteJSONLine(st, req); err != nil {
		st.Close()
		return nil, err
	}
	if _, err := agent.ReadResponse(st); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

func (s *Server) handle(ctx context.Context, st net.Conn) {
	_ = st.SetReadDeadline(time.Now().Add(30 * time.Second))
	var req agent.Request
	if err := agent.ReadJSONLine(st, &req); err != nil {
		s.log().Debug("stream without a request", "err", err)
		st.Close()
		return
	}
	_ = st.SetReadDeadline(time.Time{})
	log := s.log().With("op", req.Op)
	log.Debug("request")
	if s.serveStream(ctx, st, req) {
		return
	}
	defer st.Close()
	if req.Op == agent.OpPowerOff {
		s.powerOff(st, log)
		return
	}
	resp, err := s.answer(ctx, req)
	if err != nil {
		log.Warn("request failed", "err", err)
		resp = agent.Response{Error: err.Error()}
	}
	_ = agent.WriteJSONLine(st, resp)
}

// serveStream hands st to the op that keeps it open for its own protocol
// and reports whether req was such an op.
func (s *Server) serveStream(ctx context.Context, st net.Conn, req agent.Request) bool {
	switch req.Op {
	case agent.OpDial:
		s.dial(ctx, st, req)
	case agent.OpExec:
		s.rooms().exec.Serve(ctx, st, req)
	case agent.OpWatchPorts:
		s.rooms().ports.Serve(ctx, st)
	case agent.OpSync:
		s.serveSync(ctx, st)
	case agent.OpSyncWatch:
		s.watchSync(ctx, st, req)
	default:
		return false
	}
	return true
}

// answer runs a request answered by one response.
func (s *Server) answer(ctx context.Context, req agent.Request) (agent.Response, error) {
	resp := agent.Response{OK: true}
	switch req.Op {
	case agent.OpInfo:
		info, err := s.info()
		resp.Info = &info
		return resp, err
	case agent.OpSetup:
		if req.Setup == nil {
			return resp, errors.New("setup request without setup")
		}
		return resp, s.setup(ctx, *req.Setup)
	case agent.OpMount:
		if req.Mount == nil {
			return resp, errors.New("mount request without mount")
		}
		return resp, s.rooms().shares.Mount(ctx, *req.Mount)
	case agent.OpDocker:
		return resp, s.startRuntime(ctx, s.rooms().docker, 5*time.Minute)
	case agent.OpContainerd:
		return resp, s.startRuntime(ctx, s.rooms().ctrd, containerd.Timeout)
	case agent.OpTouch:
		return resp, s.rooms().shares.Touch(req.Touch)
	case agent.OpIdleCheck:
		n, err := idle.RunningContainers(s.path("/proc"))
		resp.Idle = &agent.IdleReport{RunningContainers: n}
		return resp, err
	case agent.OpQuiesce:
		return resp, s.quiesce(ctx)
	case agent.OpSettle:
		return resp, s.settle(ctx)
	case agent.OpFlushDisks:
		fctx, cancel := context.WithTimeout(ctx, settleFlushBudget)
		defer cancel()
		return resp, s.rooms().disks.Flush(fctx)
	case agent.OpSetTime:
		if req.Time <= 0 {
			return resp, fmt.Errorf("set-time: time %d is not a positive unix nanosecond count", req.Time)
		}
		return resp, s.OS.SetClock(time.Unix(0, req.Time))
	default:
		return resp, fmt.Errorf("unknown op %q", req.Op)
	}
}

// startRuntime starts rt, within timeout, for the host access IP and the
// DNS server, then waits for the guest's resolvers.
func (s *Server) startRuntime(ctx context.Context, rt runtime.Runtime, timeout time.Duration) error {
	ip := s.rooms().host.IP()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := rt.Start(rctx, runtime.Config{HostAccessIP: ip, DNSIP: s.rooms().dns.IP()}); err != nil {
		return err
	}
	s.rooms().dns.AwaitResolvers(ctx)
	return nil
}

// quiesce prepares the guest for an idle pause: disk blocks freed since
// the last trim are trimmed, and the keepalive pings stop until the
// host's next request, so the paused session is not ended by them when
// the VM runs again.
//
// It does not reclaim page cache: the upkeep rounds do that at their own
// pace. Forcing it here evicted what the runtime touched last (runc,
// docker-init, dockerd's code), and under TCG the first call after the
// wake then paid for reading and translating that code again: a
// GET /version took 1.47 s against 0.15 s warm.
func (s *Server) quiesce(ctx context.Context) error {
	s.rooms().disks.TrimBeforePause(ctx)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("quiesce: %w", err)
	}
	s.mu.Lock()
	k := s.keepalive
	s.mu.Unlock()
	if k != nil {
		k.Suspend()
	}
	return nil
}

// powerOff answers the request, then powers the VM off.
func (s *Server) powerOff(st net.Conn, log *slog.Logger) {
	_ = agent.Reply(st, nil)
	st.Close()
	log.Info("powering off")
	// Give the reply time to leave the channel before systemd stops us.
	time.Sleep(200 * time.Millisecond)
	if _, err := s.OS.Run(context.Background(), "systemctl", "poweroff"); err != nil {
		log.Error("poweroff", "err", err)
	}
}

func (s *Server) info() (agent.Info, error) {
	info := agent.Info{Version: agent.Version, Arch: goruntime.GOARCH}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return info, fmt.Errorf("uname: %w", err)
	}
	info.Kernel = unix.ByteSliceToString(uts.Release[:])
	info.Hostname = unix.ByteSliceToString(uts.Nodename[:])
	info.Addrs = networkAddrs()
	info.DNSUpstreams = s.rooms().dns.CurrentUpstreams()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return info, fmt.Errorf("read uptime: %w", err)
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		info.Uptime, _ = strconv.ParseFloat(f[0], 64)
	}
	return info, nil
}
