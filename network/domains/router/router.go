// Package router is the HTTP(S) front of container domains: it takes a
// request for <name>.vmdock.localhost on a loopback port, finds the name in
// the registered profiles' route tables, and proxies it to the container's
// address inside that profile's guest through the profile's dial function
// (the agent channel in production).
//
// Who owns the ports: only one process can hold 127.0.0.1:80, so one
// Router (the front) serves every running profile: the first host agent
// to bind the ports runs it, and the others register their profiles with
// it and are reached through their own Router on a unix socket
// (KeepForwarded); see network/domains/sharedrouter.
package router

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/vmdock/vmdock/network/domains"
)

// DialFunc opens a stream to network/addr inside a profile's guest; it has
// network.DialFunc's signature, so the agent channel's Dial fits.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

type profile struct {
	table     *domains.Table
	transport *http.Transport
	proxy     *httputil.ReverseProxy
}

// Router is an http.Handler routing by Host (and, over TLS, checking the
// Host against the SNI name).
type Router struct {
	// KeepForwarded passes X-Forwarded-* on as they came instead of
	// setting them: for a Router behind another vmdock router (the one
	// that owns the ports), whose headers describe the real client.
	KeepForwarded bool

	mu       sync.RWMutex
	profiles map[string]*profile
	merged   *domains.Table
	// dropped are names the router held and no longer does, with when
	// they went: a restarting container keeps its certificate.
	dropped map[string]time.Time
	now     func() time.Time
}

// recentlyHeld is how long a name that went keeps its certificate.
const recentlyHeld = 5 * time.Minute

// New returns a Router with no profiles: every name is unknown.
func New() *Router {
	return &Router{profiles: map[string]*profile{}, dropped: map[string]time.Time{}, now: time.Now}
}

type routeKey struct{}

var forwardedHeaders = []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"}

// Register adds a profile whose guest dial reaches; its names appear with
// SetTable. Registering a profile again replaces its dial function.
func (r *Router) Register(name string, dial DialFunc) {
	t := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", addr)
		},
		// Containers speak HTTP/1.1 in the clear; the body passes through
		// as the container sent it, compressed or not.
		DisableCompression:    true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	p := &profile{transport: t}
	p.proxy = &httputil.ReverseProxy{
		Transport: t,
		Rewrite: func(pr *httputil.ProxyRequest) {
			rt := pr.In.Context().Value(routeKey{}).(domains.Route)
			pr.SetURL(&url.URL{Scheme: "http", Host: rt.Addr})
			// The container sees the name the browser asked for, so the
			// links it makes point back through the router.
			pr.Out.Host = pr.In.Host
			if r.KeepForwarded {
				for _, h := range forwardedHeaders {
					if v := pr.In.Header.Values(h); len(v) > 0 {
						pr.Out.Header[h] = v
					}
				}
				return
			}
			pr.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			rt := req.Context().Value(routeKey{}).(domains.Route)
			slog.Debug("domains: proxy", "name", rt.Name, "addr", rt.Addr, "err", err)
			page(w, http.StatusBadGateway, "Container not answering",
				fmt.Sprintf("%s goes to container %s port %d (profile %s), which did not answer: %v", rt.Name, rt.Container, rt.Port, rt.Profile, err))
		},
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.profiles[name]; old != nil {
		p.table = old.table
		old.transport.CloseIdleConnections()
	}
	r.profiles[name] = p
	r.remerge()
}

// SetTable replaces a registered profile's names.
func (r *Router) SetTable(name string, t *domains.Table) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.profiles[name]
	if p == nil {
		return fmt.Errorf("domains: profile %q is not registered with the router", name)
	}
	p.table = t
	r.remerge()
	return nil
}

// Unregister drops a profile and its names (its VM stopped).
func (r *Router) Unregister(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.profiles[name]; p != nil {
		p.transport.CloseIdleConnections()
		delete(r.profiles, name)
		r.remerge()
	}
}

// remerge resolves all profiles' names as one and notes the names that
// went; r.mu is held.
func (r *Router) remerge() {
	ts := make([]*domains.Table, 0, len(r.profiles))
	for _, p := range r.profiles {
		ts = append(ts, p.table)
	}
	merged := domains.Merge(ts...)
	now := r.now()
	for _, rt := range r.merged.Routes() {
		if _, ok := merged.Lookup(rt.Name); !ok {
			r.dropped[rt.Name] = now
		}
	}
	for name, at := range r.dropped {
		if _, ok := merged.Lookup(name); ok || now.Sub(at) >= recentlyHeld {
			delete(r.dropped, name)
		}
	}
	r.merged = merged
}

// Known reports whether the router holds name now or held it within
// recentlyHeld: the names the local CA may sign a leaf for.
func (r *Router) Known(name string) bool {
	name = domains.HostName(name)
	r.mu.RLock()
	defer r.mu.RUnlock()
	if _, ok := r.merged.Lookup(name); ok {
		return true
	}
	at, ok := r.dropped[name]
	return ok && r.now().Sub(at) < recentlyHeld
}

// Table is every registered profile's names, resolved together.
func (r *Router) Table() *domains.Table {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.merged
}

func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	host := domains.HostName(req.Host)
	if req.TLS != nil && req.TLS.ServerName != "" && domains.HostName(req.TLS.ServerName) != host {
		// The certificate covers only the SNI name; a browser reusing the
		// connection for another name must open its own.
		page(w, http.StatusMisdirectedRequest, "Misdirected request",
			fmt.Sprintf("this connection is for %s, not %s", req.TLS.ServerName, host))
		return
	}
	r.mu.RLock()
	rt, ok := r.merged.Lookup(host)
	var p *profile
	if ok {
		p = r.profiles[rt.Profile]
	}
	r.mu.RUnlock()
	if !ok || p == nil {
		page(w, http.StatusNotFound, "No such container name",
			fmt.Sprintf("no running container answers to %s. `vmdock domains` lists the names there are.", host))
		return
	}
	if rt.Problem != "" {
		page(w, http.StatusBadGateway, "Cannot route "+rt.Name, rt.Problem)
		return
	}
	p.proxy.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), routeKey{}, rt)))
}

// page answers a short HTML page at once, so an unknown name never hangs.
func page(w http.ResponseWriter, code int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintf(w, "<!doctype html><title>%s</title><h1>%s</h1><p>%s</p><p><small>vmdock container domains</small></p>\n",
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(text))
}

// idleTimeout closes keep-alive connections no request uses, so idle
// browser tabs do not hold connections for ever. There is deliberately
// no Read/WriteTimeout: event streams may go quiet for long, uploads may
// be large, and neither is idle while its request runs.
var idleTimeout = 5 * time.Minute

// maxHeaderBytes bounds a request's header block; browsers send a few
// KiB even with many cookies.
const maxHeaderBytes = 64 << 10

// Server is an http.Server for the router. With getCert it is the HTTPS
// server (call ServeTLS(ln, "", "")): HTTP/2 and HTTP/1.1 by ALPN, the
// certificate chosen by SNI, and asked of getCert only for names the
// router knows (Known), so a client cannot have the CA sign names at will.
func (r *Router) Server(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *http.Server {
	srv := &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slogErrorLog(),
	}
	if getCert == nil {
		// HTTP/1 only: Serve's HTTP/2 setup would give a plain server a
		// TLSConfig, and Serve below would then take its next listener
		// (::1 after 127.0.0.1) for TLS without a certificate.
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
	}
	if getCert != nil {
		srv.TLSConfig = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: r.knownOnly(getCert),
			NextProtos:     []string{"h2", "http/1.1"},
		}
	}
	return srv
}

// knownOnly is getCert for the names the router knows. For another name
// it returns no certificate and no error, which crypto/tls answers with
// the unrecognized_name alert. No name at all goes on to getCert, which
// says what to use instead.
func (r *Router) knownOnly(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if hello.ServerName != "" && !r.Known(hello.ServerName) {
			slog.Debug("domains: TLS for a name the router does not hold", "name", fmt.Sprintf("%.80q", hello.ServerName))
			return nil, nil
		}
		return getCert(hello)
	}
}

// Serve runs srv on ln until ln closes, TLS when srv has a TLSConfig.
func Serve(srv *http.Server, ln net.Listener) error {
	var err error
	if srv.TLSConfig != nil {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
