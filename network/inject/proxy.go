package inject

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"
)

// Secret is one credential: Value goes in Header of every request to
// Host.
type Secret struct {
	Host   string
	Header string
	Value  string
}

// Proxy serves the intercepted connections.
type Proxy struct {
	ca      *CA
	secrets map[string]Secret
	// Upstream is the trust for the real hosts; nil: the host's.
	Upstream *x509.CertPool
	Log      *slog.Logger

	mu    sync.Mutex
	certs map[string]*tls.Certificate
}

// New is a proxy for secrets, their certificates from ca.
func New(ca *CA, secrets []Secret) *Proxy {
	p := &Proxy{ca: ca, secrets: map[string]Secret{}, certs: map[string]*tls.Certificate{}, Log: slog.Default()}
	for _, s := range secrets {
		p.secrets[strings.ToLower(s.Host)] = s
	}
	return p
}

// Handle serves guest, a TCP connection the guest opened to dst (an
// address the sandbox may reach, port 443), whose other end is the real
// host through dial: a TLS connection to a secret's host is intercepted,
// any other is relayed as it is.
func (p *Proxy) Handle(guest net.Conn, dst string, dial func(ctx context.Context) (net.Conn, error)) {
	defer guest.Close()
	sni, hello := peekServerName(guest)
	replay := &replayConn{Conn: guest, r: io.MultiReader(bytes.NewReader(hello), guest)}
	secret, ok := p.secrets[strings.ToLower(sni)]
	if !ok {
		relay(replay, dial)
		return
	}
	p.intercept(replay, secret, dst)
}

func (p *Proxy) intercept(guest net.Conn, s Secret, dst string) {
	cert, err := p.cert(s.Host)
	if err != nil {
		p.Log.Warn("sandbox secret proxy", "host", s.Host, "err", err)
		return
	}
	tlsConn := tls.Server(guest, &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", dst)
		},
		TLSClientConfig:   &tls.Config{ServerName: s.Host, RootCAs: p.Upstream, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: false, ResponseHeaderTimeout: 5 * time.Minute,
	}
	defer transport.CloseIdleConnections()
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host, r.Out.Host = "https", s.Host, s.Host
			r.Out.Header.Set(s.Header, s.Value)
		},
		Transport: transport,
		ErrorLog:  nil,
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: time.Minute}
	_ = srv.Serve(&oneConnListener{conn: tlsConn})
}

func (p *Proxy) cert(host string) (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.certs[host]; c != nil {
		return c, nil
	}
	c, err := p.ca.leaf(host)
	if err != nil {
		return nil, err
	}
	p.certs[host] = c
	return c, nil
}

// relay copies both ways between guest and the real destination.
func relay(guest net.Conn, dial func(ctx context.Context) (net.Conn, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	up, err := dial(ctx)
	cancel()
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, guest); done <- struct{}{} }()
	go func() { _, _ = io.Copy(guest, up); done <- struct{}{} }()
	<-done
}

// peekServerName reads the guest's ClientHello and returns its server
// name and the bytes read (to replay); nothing is written to the guest.
func peekServerName(c net.Conn) (string, []byte) {
	var seen bytes.Buffer
	var name string
	errStop := errors.New("peeked")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	_ = tls.Server(peekConn{r: io.TeeReader(c, &seen)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) { name = h.ServerName; return nil, errStop },
	}).Handshake()
	return name, seen.Bytes()
}

// peekConn reads through r and swallows writes (the aborted handshake's
// alert).
type peekConn struct {
	net.Conn
	r io.Reader
}

func (c peekConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c peekConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c peekConn) Close() error                     { return nil }
func (c peekConn) SetDeadline(time.Time) error      { return nil }
func (c peekConn) SetReadDeadline(time.Time) error  { return nil }
func (c peekConn) SetWriteDeadline(time.Time) error { return nil }
func (c peekConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c peekConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }

type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// oneConnListener hands out one connection, then waits for it to end.
type oneConnListener struct {
	conn net.Conn
	once sync.Once
	done chan struct{}
	mu   sync.Mutex
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	done := l.done
	l.mu.Unlock()
	var c net.Conn
	l.once.Do(func() { c = &closeNotifyConn{Conn: l.conn, done: done} })
	if c != nil {
		return c, nil
	}
	<-done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error { return nil }
func (l *oneConnListener) Addr() net.Addr {
	return l.conn.LocalAddr()
}

type closeNotifyConn struct {
	net.Conn
	done chan struct{}
	once sync.Once
}

func (c *closeNotifyConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}
