package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/vmdock/vmdock/bench/probe"
)

// SectionRemote measures a remote instance (`vmdock start --remote`): the
// Docker API and a published port through the instance's one ssh session,
// against the same engine and port reached without vmdock.
const SectionRemote = "remote"

// RemoteEnv is a remote instance's server as the remote section reaches
// it without vmdock; the CLI fills it.
type RemoteEnv struct {
	// Server is the instance's ssh:// URL, for notes.
	Server string
	// Host is the server's address as ssh resolves it (the user's ssh
	// config applied): where its published ports are dialled directly.
	Host string
	// EngineSocket is the engine's socket on the server.
	EngineSocket string
	// Forward runs OpenSSH's own forward of remote (a socket path or
	// host:port on the server) to local (one on this machine), with the
	// ssh command and options the instance's session uses, until stop;
	// stop says why ssh had ended if it ended by itself.
	Forward func(local, remote string) (stop func() error, err error)
	// ForwardSocket is where the forward of the engine's socket listens
	// on this machine: a path short enough for a unix socket.
	ForwardSocket string
	// Busybox is a static Linux busybox for the server's arch: the
	// published port's file server, imported as an image (never pulled).
	Busybox string
}

// The remote section's variants. The first of each metric is its baseline:
// the engine and the port as a user reaches them without vmdock.
const (
	remoteDirect  = "server address, no ssh"
	remoteSSH     = "OpenSSH forward (ssh -L)"
	remoteSession = "vmdock session"
)

// remoteReady bounds the wait for a forward or a fresh container to
// answer; remoteOtherPath the wait for another path to a container that
// answers already (ssh's connect timeout is 10 s).
const (
	remoteReady     = 60 * time.Second
	remoteOtherPath = 15 * time.Second
)

// remote measures the Docker API and a published port's stream. Each
// part's failure is a line of its own, so one does not hide the other.
func (r *runner) remote(ctx context.Context) error {
	re := r.env.Remote
	if err := r.remoteAPI(ctx, re); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.rep.Skipped = append(r.rep.Skipped, "remote api: "+err.Error())
	}
	if err := r.remotePorts(ctx, re); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.rep.Skipped = append(r.rep.Skipped, "remote ports: "+err.Error())
	}
	return nil
}

// remoteAPIRequests are the API calls measured: what every docker command
// starts with, on a kept connection and on a new one each time (a docker
// command opens its own).
var remoteAPIRequests = []struct {
	metric, path string
	fresh        bool
}{
	{"docker GET /_ping", "/_ping", false},
	{"docker GET /version", "/version", false},
	{"docker GET /_ping, new connection each", "/_ping", true},
}

// remoteAPI times API round trips through OpenSSH's forward of the
// engine's socket and through the instance's docker.sock, rounds
// interleaved so both see the same link and load.
func (r *runner) remoteAPI(ctx context.Context, re *RemoteEnv) error {
	stop, err := re.Forward(re.ForwardSocket, re.EngineSocket)
	if err != nil {
		return fmt.Errorf("OpenSSH's forward of %s: %w", re.EngineSocket, err)
	}
	defer stop()
	socks := map[string]string{remoteSSH: re.ForwardSocket, remoteSession: r.env.DockerSocket}
	variants := []string{remoteSSH, remoteSession}
	if err := waitAPI(ctx, re.ForwardSocket, remoteReady); err != nil {
		if serr := stop(); serr != nil {
			err = serr
		}
		return fmt.Errorf("OpenSSH's forward of %s: %w", re.EngineSocket, err)
	}
	rounds, perRound := 10, 50
	if r.opt.Quick {
		rounds, perRound = 5, 20
	}
	clients := map[string][2]*http.Client{}
	for _, v := range variants {
		clients[v] = [2]*http.Client{probe.UnixHTTPClient(socks[v]), unixClientNoReuse(socks[v])}
		defer clients[v][0].CloseIdleConnections()
	}
	samples := make([]map[string][]time.Duration, len(remoteAPIRequests))
	for i := range samples {
		samples[i] = map[string][]time.Duration{}
	}
	for round := range rounds + 1 {
		for _, v := range variants {
			for i, q := range remoteAPIRequests {
				c := clients[v][boolInt(q.fresh)]
				d, err := probe.HTTPLatency(ctx, c, "http://docker"+q.path, perRound)
				if err != nil {
					return fmt.Errorf("%s: %w", v, err)
				}
				if round > 0 { // round 0 opens the kept connections, unmeasured
					samples[i][v] = append(samples[i][v], d...)
				}
			}
		}
	}
	for i, q := range remoteAPIRequests {
		for _, res := range latencyRows(SectionRemote, q.metric, variants, samples[i]) {
			r.rep.Add(res)
		}
	}
	return nil
}

// unixClientNoReuse talks HTTP on sock, a new connection per request.
func unixClientNoReuse(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// waitAPI waits until the engine answers /_ping on sock.
func waitAPI(ctx context.Context, sock string, timeout time.Duration) error {
	c := unixClientNoReuse(sock)
	deadline := time.Now().Add(timeout)
	for {
		_, err := probe.HTTPLatency(ctx, c, "http://docker/_ping", 1)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no answer on %s within %s: %w", sock, timeout, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// latencyRows are a p50 and a p90 row per variant of one metric, the
// variants in order (the first is the baseline); a variant without
// samples has none. A row other than the baseline's notes its difference.
func latencyRows(section, metric string, variants []string, samples map[string][]time.Duration) []Result {
	var out []Result
	for _, p := range []float64{50, 90} {
		base := -1.0
		for _, v := range variants {
			s := samples[v]
			if len(s) == 0 {
				continue
			}
			val := ms(Percentile(s, p))
			note := fmt.Sprintf("%d samples", len(s))
			if base < 0 {
				base = val
			} else {
				note += fmt.Sprintf(", %+.2f ms", val-base)
			}
			out = append(out, Result{Section: section, Metric: fmt.Sprintf("%s p%.0f", metric, p), Variant: v,
				Value: val, Unit: "ms", Better: Lower, Note: note})
		}
	}
	return out
}

// throughputRows are one row per variant of metric: the median of its
// rounds' MB/s, the variants in order (the first is the baseline).
func throughputRows(section, metric string, variants []string, samples map[string][]float64) []Result {
	var out []Result
	for _, v := range variants {
		if s := samples[v]; len(s) > 0 {
			out = append(out, Result{Section: section, Metric: metric, Variant: v, Value: median(s), Unit: "MB/s", Better: Higher,
				Note: fmt.Sprintf("median of %d rounds", len(s))})
		}
	}
	return out
}

// remoteStreamBytes is the published port's download: large enough that
// ssh's ciphers, not the round trip, bound it on a fast link.
func (r *runner) remoteStreamBytes() int64 {
	if r.opt.Quick {
		return 64 << 20
	}
	return 256 << 20
}

// portPath is one way to the published port, and the address it is
// dialled at on this machine.
type portPath struct {
	variant, addr string
	stop          func() error
}

// remotePorts runs a busybox httpd container serving a file of random
// bytes on the server and downloads it, and times connect+first byte of a
// small one, at the server's address, through OpenSSH's forward of the
// port and through the instance's forwarded localhost port, rounds
// interleaved.
func (r *runner) remotePorts(ctx context.Context, re *RemoteEnv) error {
	n := r.remoteStreamBytes()
	srv, err := startFileServer(ctx, r.env.DockerSocket, re.Busybox, n)
	if err != nil {
		return err
	}
	defer srv.remove()
	paths, err := r.portPaths(ctx, re, srv)
	defer func() {
		for _, p := range paths {
			if p.stop != nil {
				_ = p.stop()
			}
		}
	}()
	if err != nil {
		return err
	}
	rounds, perRound := 5, 20
	if r.opt.Quick {
		rounds, perRound = 3, 10
	}
	stream, first := map[string][]float64{}, map[string][]time.Duration{}
	var variants []string
	for _, p := range paths {
		variants = append(variants, p.variant)
	}
	for round := range rounds {
		for _, p := range paths {
			got, _, total, err := fetch(ctx, p.addr, "/big", io.Discard)
			if err == nil && got != n {
				err = fmt.Errorf("%d of %d bytes", got, n)
			}
			if err != nil {
				return fmt.Errorf("round %d, %s: download: %w", round+1, p.variant, err)
			}
			stream[p.variant] = append(stream[p.variant], float64(n)/1e6/total.Seconds())
			for range perRound {
				_, fb, _, err := fetch(ctx, p.addr, "/small", io.Discard)
				if err != nil {
					return fmt.Errorf("round %d, %s: %w", round+1, p.variant, err)
				}
				first[p.variant] = append(first[p.variant], fb)
			}
		}
	}
	for _, res := range throughputRows(SectionRemote, fmt.Sprintf("published port download %dMB", n>>20), variants, stream) {
		r.rep.Add(res)
	}
	for _, res := range latencyRows(SectionRemote, "published port connect+first byte", variants, first) {
		r.rep.Add(res)
	}
	return nil
}

// portPaths are the ways to the file server's port that answer: the
// server's address and OpenSSH's forward (each left out with a line of
// why when it does not answer: a firewall, a ProxyJump), then the
// instance's localhost port, which must. That one is waited for first:
// once the host agent holds the port, the forward's free port cannot be
// the same one.
func (r *runner) portPaths(ctx context.Context, re *RemoteEnv, srv *fileServer) ([]portPath, error) {
	port := fmt.Sprint(srv.port)
	session := portPath{variant: remoteSession + " (localhost)", addr: net.JoinHostPort("127.0.0.1", port)}
	if err := srv.wait(ctx, session.addr, remoteReady); err != nil {
		return nil, fmt.Errorf("the published port %d is not forwarded to this machine's loopback: %w", srv.port, err)
	}
	var paths []portPath
	skip := func(variant string, err error) {
		r.rep.Skipped = append(r.rep.Skipped, fmt.Sprintf("remote ports %s: %v", variant, err))
	}
	if re.Host == "" {
		skip(remoteDirect, errors.New("the server's address is not known"))
	} else if addr := net.JoinHostPort(re.Host, port); srv.wait(ctx, addr, remoteOtherPath) == nil {
		paths = append(paths, portPath{variant: remoteDirect, addr: addr})
	} else {
		skip(remoteDirect, fmt.Errorf("%s does not answer from here (a firewall, or a server only reached through a jump host)", addr))
	}
	local, err := freePort()
	if err != nil {
		return paths, err
	}
	laddr := net.JoinHostPort("127.0.0.1", fmt.Sprint(local))
	stop, err := re.Forward(laddr, net.JoinHostPort("127.0.0.1", port))
	if err == nil {
		if err = srv.wait(ctx, laddr, remoteOtherPath); err == nil {
			paths = append(paths, portPath{variant: remoteSSH, addr: laddr, stop: stop})
		} else if serr := stop(); serr != nil {
			err = serr
		}
	}
	if err != nil {
		skip(remoteSSH, err)
	}
	return append(paths, session), nil
}

// fetch GETs path from the HTTP server at addr on a new connection and
// copies the body to w: the body's size, the time from the dial to the
// response's first byte and to its last.
func fetch(ctx context.Context, addr, path string, w io.Writer) (n int64, first, total time.Duration, err error) {
	start := time.Now()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, 0, 0, err
	}
	defer conn.Close()
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.0\r\nHost: bench\r\n\r\n"); err != nil {
		return 0, 0, 0, err
	}
	fr := &firstByte{r: conn}
	resp, err := http.ReadResponse(bufio.NewReader(fr), nil)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("GET %s from %s: %w", path, addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, 0, fmt.Errorf("GET %s from %s: %s", path, addr, resp.Status)
	}
	n, err = io.Copy(w, resp.Body)
	if err != nil {
		return n, 0, 0, fmt.Errorf("GET %s from %s: after %d bytes: %w", path, addr, n, err)
	}
	return n, fr.at.Sub(start), time.Since(start), nil
}

// firstByte notes when the first byte came.
type firstByte struct {
	r  io.Reader
	at time.Time
}

func (f *firstByte) Read(b []byte) (int, error) {
	n, err := f.r.Read(b)
	if n > 0 && f.at.IsZero() {
		f.at = time.Now()
	}
	return n, err
}

// splitSections are the sections of secs an instance of this kind runs,
// and one line for those it cannot: a remote instance has no VM to run
// the others in, a VM instance no server for the remote one.
func splitSections(secs []string, re *RemoteEnv) (run []string, skip string) {
	var cannot []string
	for _, s := range secs {
		if (s == SectionRemote) == (re != nil) {
			run = append(run, s)
		} else {
			cannot = append(cannot, s)
		}
	}
	switch {
	case len(cannot) == 0:
	case re == nil:
		skip = SectionRemote + ": needs a remote instance (vmdock start --remote ssh://HOST); this one runs a VM"
	default:
		skip = fmt.Sprintf("%s: a remote instance runs no VM (its engine is the server's, %s); --sections %s measures it",
			strings.Join(cannot, ", "), re.Server, SectionRemote)
	}
	return run, skip
}

// DefaultSections are the sections a bench without --sections runs: the
// VM's on a VM instance, the remote one on a remote instance.
func DefaultSections(remote bool) []string {
	if remote {
		return []string{SectionRemote}
	}
	return slices.DeleteFunc(slices.Clone(Sections), func(s string) bool { return s == SectionRemote })
}
