package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/vmdock/vmdock/internal/connpipe"
)

// Version is the agent protocol/binary version, set with
// -ldflags "-X github.com/vmdock/vmdock/agent.Version=...".
var Version = "dev"

// Client is the host's end of the agent session.
type Client struct {
	sess      *yamux.Session
	log       *slog.Logger
	keepalive *Keepalive

	mu      sync.Mutex
	handler func(Request, net.Conn)
}

// Connect does the handshake on conn and starts the yamux session. ctx
// bounds only the handshake; conn is closed when it fails.
func Connect(ctx context.Context, conn net.Conn) (*Client, error) {
	return ConnectLogger(ctx, conn, slog.Default())
}

// ConnectLogger is Connect with an explicit logger.
func ConnectLogger(ctx context.Context, conn net.Conn, log *slog.Logger) (*Client, error) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	err := HostHello(conn, NewNonce())
	if !stop() {
		conn.Close()
		return nil, fmt.Errorf("agent handshake: %w", context.Cause(ctx))
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("agent handshake: %w", err)
	}
	cfg := YamuxConfig(log)
	// A stream opened just as the VM pauses while idle is answered at the
	// wake, minutes later; the keepalive, not the open, tells a dead guest.
	cfg.StreamOpenTimeout = 0
	sess, err := yamux.Client(conn, cfg)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("start agent session: %w", err)
	}
	c := &Client{sess: sess, log: log, keepalive: StartKeepalive(sess, KeepaliveInterval, log)}
	go c.acceptLoop()
	return c, nil
}

// Keepalive is the session's keepalive, suspended while the VM is paused.
func (c *Client) Keepalive() *Keepalive { return c.keepalive }

// Close ends the session.
func (c *Client) Close() error { return c.sess.Close() }

// Done is closed when the session has ended (guest gone, Close called).
func (c *Client) Done() <-chan struct{} { return c.sess.CloseChan() }

// HandleGuestStreams sets the handler for streams the guest opens
// (OpHostDial). The handler owns conn: it must answer with Reply, then use
// and close it. Without a handler such streams are refused.
func (c *Client) HandleGuestStreams(h func(req Request, conn net.Conn)) {
	c.mu.Lock()
	c.handler = h
	c.mu.Unlock()
}

func (c *Client) acceptLoop() {
	for {
		st, err := c.sess.AcceptStream()
		if err != nil {
			return
		}
		go c.serveGuestStream(st)
	}
}

func (c *Client) serveGuestStream(st *yamux.Stream) {
	_ = st.SetReadDeadline(time.Now().Add(30 * time.Second))
	var req Request
	if err := ReadJSONLine(st, &req); err != nil {
		c.log.Debug("guest stream without a request", "err", err)
		st.Close()
		return
	}
	_ = st.SetReadDeadline(time.Time{})
	c.mu.Lock()
	h := c.handler
	c.mu.Unlock()
	if h == nil {
		_ = Reply(st, fmt.Errorf("host does not handle %q streams", req.Op))
		st.Close()
		return
	}
	h(req, st)
}

// open starts a stream with req and reads the Response. The stream is
// closed when ctx ends before the response arrives.
func (c *Client) open(ctx context.Context, req Request) (*yamux.Stream, Response, error) {
	st, err := c.sess.OpenStream()
	if err != nil {
		return nil, Response{}, fmt.Errorf("agent %s: open stream: %w", req.Op, err)
	}
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	if err := WriteJSONLine(st, req); err != nil {
		st.Close()
		return nil, Response{}, fmt.Errorf("agent %s: %w", req.Op, err)
	}
	resp, err := ReadResponse(st)
	if err != nil {
		st.Close()
		if ctx.Err() != nil {
			return nil, resp, fmt.Errorf("agent %s: %w", req.Op, context.Cause(ctx))
		}
		return nil, resp, fmt.Errorf("agent %s: %w", req.Op, err)
	}
	return st, resp, nil
}

// call is open for request/response ops without payload.
func (c *Client) call(ctx context.Context, req Request) (Response, error) {
	st, resp, err := c.open(ctx, req)
	if err != nil {
		return resp, err
	}
	st.Close()
	return resp, nil
}

// OpenSync opens a stream to the guest's sync endpoint server; the caller
// speaks the sync engine's protocol on it (mounts/syncmount).
func (c *Client) OpenSync(ctx context.Context) (net.Conn, error) {
	st, _, err := c.open(ctx, Request{Op: OpSync})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// WatchSync streams the IDs of sync mounts whose guest copy changed until
// ctx ends or the session does; each ID goes to changed.
func (c *Client) WatchSync(ctx context.Context, w SyncWatch, changed func(id string)) error {
	st, _, err := c.open(ctx, Request{Op: OpSyncWatch, SyncWatch: &w})
	if err != nil {
		return err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	for {
		var ch SyncChange
		if err := ReadJSONLine(st, &ch); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("sync watch: %w", err)
		}
		changed(ch.ID)
	}
}

// Touch has the guest raise inotify events for paths in shares.
func (c *Client) Touch(ctx context.Context, paths []string) error {
	_, err := c.call(ctx, Request{Op: OpTouch, Touch: paths})
	return err
}

// Info asks the guest who it is.
func (c *Client) Info(ctx context.Context) (Info, error) {
	resp, err := c.call(ctx, Request{Op: OpInfo})
	if err != nil {
		return Info{}, err
	}
	if resp.Info == nil {
		return Info{}, errors.New("agent info: empty answer")
	}
	return *resp.Info, nil
}

// Setup prepares the guest system (hostname, DNS, disks, host access).
func (c *Client) Setup(ctx context.Context, s Setup) error {
	_, err := c.call(ctx, Request{Op: OpSetup, Setup: &s})
	return err
}

// Mount mounts one share in the guest; mounting it again is a no-op.
func (c *Client) Mount(ctx context.Context, m MountRequest) error {
	_, err := c.call(ctx, Request{Op: OpMount, Mount: &m})
	return err
}

// StartDocker starts dockerd and returns once /var/run/docker.sock answers.
func (c *Client) StartDocker(ctx context.Context) error {
	_, err := c.call(ctx, Request{Op: OpDocker})
	return err
}

// StartContainerd starts containerd (and BuildKit) and returns once
// containerd answers; the port watch then also reports nerdctl's published
// ports.
func (c *Client) StartContainerd(ctx context.Context) error {
	_, err := c.call(ctx, Request{Op: OpContainerd})
	return err
}

// SetTime sets the guest clock, e.g. after a host sleep or a restore.
func (c *Client) SetTime(ctx context.Context, t time.Time) error {
	_, err := c.call(ctx, Request{Op: OpSetTime, Time: t.UnixNano()})
	return err
}

// IdleCheck asks the guest what keeps it busy.
func (c *Client) IdleCheck(ctx context.Context) (IdleReport, error) {
	resp, err := c.call(ctx, Request{Op: OpIdleCheck})
	if err != nil {
		return IdleReport{}, err
	}
	if resp.Idle == nil {
		return IdleReport{}, fmt.Errorf("agent %s: the answer has no report", OpIdleCheck)
	}
	return *resp.Idle, nil
}

// Quiesce asks the guest to give back cold memory and freed disk blocks
// now and to stop its keepalive pings until the host's next request: the
// VM is about to pause.
func (c *Client) Quiesce(ctx context.Context) error {
	_, err := c.call(ctx, Request{Op: OpQuiesce})
	return err
}

// PowerOff asks the guest to shut down; it answers before doing so.
// Settle stops the guest's container runtimes and flushes its disks, for
// a VM the host ends instead of powering it off.
func (c *Client) Settle(ctx context.Context) error {
	_, err := c.call(ctx, Request{Op: OpSettle})
	return err
}

// FlushDisks asks the guest to put what it wrote on its disks, for a VM
// the host ends at once (a forced stop).
func (c *Client) FlushDisks(ctx context.Context) error {
	_, err := c.call(ctx, Request{Op: OpFlushDisks})
	return err
}

func (c *Client) PowerOff(ctx context.Context) error {
	_, err := c.call(ctx, Request{Op: OpPowerOff})
	return err
}

// Dial connects to addr inside the guest. tcp and unix give a byte stream;
// udp gives a *DatagramConn (one Read/Write per datagram).
func (c *Client) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "unix", "udp", "udp4", "udp6":
	default:
		return nil, fmt.Errorf("dial guest %s: network %q is not tcp, udp or unix", addr, network)
	}
	st, _, err := c.open(ctx, Request{Op: OpDial, Network: network, Address: addr})
	if err != nil {
		return nil, fmt.Errorf("dial guest %s %s: %w", network, addr, err)
	}
	// udp streams carry length-prefixed datagrams; the caller frames them
	// (NewDatagramConn, or the port forwarder's own packet stream), so
	// nothing frames twice.
	// A yamux Close only ends our sending side: as CloseWrite it lets
	// connpipe.Pipe pass a client's end of input on to the guest.
	return connpipe.CloseIsCloseWrite(st), nil
}

// maxPortEventLine bounds one line of the port watch. An event is under
// 100 bytes; a guest that sends more without a newline is broken or
// hostile, and must not make the host buffer it.
const maxPortEventLine = 4 << 10

// WatchPorts streams changes of the guest's listening sockets; the first
// events are the current set, ended by one with Synced set. The channel
// closes when ctx ends, the session dies, or the guest sends a line longer
// than maxPortEventLine or one that is not a PortEvent.
func (c *Client) WatchPorts(ctx context.Context) (<-chan PortEvent, error) {
	st, _, err := c.open(ctx, Request{Op: OpWatchPorts})
	if err != nil {
		return nil, err
	}
	ch := make(chan PortEvent)
	stop := context.AfterFunc(ctx, func() { st.Close() })
	go func() {
		defer close(ch)
		defer stop()
		defer st.Close()
		lines := bufio.NewScanner(st)
		lines.Buffer(make([]byte, 0, 512), maxPortEventLine)
		for lines.Scan() {
			var ev PortEvent
			if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
				c.log.Warn("port watch: the guest sent something that is not a port event; watch ended", "line", string(truncate(lines.Bytes())), "err", err)
				return
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
		if err := lines.Err(); err != nil && ctx.Err() == nil {
			if errors.Is(err, bufio.ErrTooLong) {
				c.log.Warn("port watch: the guest sent a line over the limit; watch ended", "limit", maxPortEventLine)
				return
			}
			c.log.Debug("port watch ended", "err", err)
		}
	}()
	return ch, nil
}

// Exec runs req in the guest, copying stdin to it and its output to stdout
// (and stderr without TTY). resize may be nil. Cancelling ctx closes the
// stream, which kills the process in the guest.
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdin io.Reader, stdout, stderr io.Writer, resize <-chan [2]uint16) (int, error) {
	st, err := c.OpenRaw(ctx)
	if err != nil {
		return -1, err
	}
	defer st.Close()
	return ExecStream(ctx, st, req, stdin, stdout, stderr, resize)
}
