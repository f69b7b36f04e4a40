package hostagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/network/proxy"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/hostcerts"
)

// corpNet is what a start reads of the host for a corporate network: the
// CA certificates the guest trusts and the proxy its daemons use. Both are
// read once per start, so a change on the host takes effect at the next
// start (and, through the fingerprint, is never hidden by a resume).
type corpNet struct {
	certs hostcerts.Set
	proxy proxy.Effective
}

// readCorpNet collects the CA set and resolves the proxy; a bad PEM file
// or proxy URL is the start's error, before anything in the guest changes.
func readCorpNet(cfg config.Config, getenv func(string) string, system func() (proxy.Settings, string, error)) (corpNet, error) {
	home, _ := os.UserHomeDir()
	files := make([]string, 0, len(cfg.CACerts))
	for _, f := range cfg.CACerts {
		if f == "~" || strings.HasPrefix(f, "~/") {
			f = filepath.Join(home, strings.TrimPrefix(f, "~"))
		}
		files = append(files, f)
	}
	certs, err := hostcerts.Collect(hostcerts.Options{Host: cfg.HostCACerts, Files: files})
	if err != nil {
		return corpNet{}, err
	}
	eff, err := proxy.Resolve(cfg.Proxy, getenv, system)
	if err != nil {
		return corpNet{}, err
	}
	eff.Settings = eff.Settings.RewriteLoopback(cfg.Network.HostAccessIP)
	return corpNet{certs: certs, proxy: eff}, nil
}

// stepHostSettings reads them before the saved state is judged: the
// fingerprint includes them.
func (ha *hostAgent) stepHostSettings(context.Context) error {
	c, err := readCorpNet(ha.cfg, os.Getenv, proxy.System)
	if err != nil {
		return err
	}
	slog.Info("host settings for the guest", "caCerts", c.certs.Describe(), "proxy", c.proxy.Masked(), "proxySource", c.proxy.Source, "pac", c.proxy.PAC)
	if c.proxy.PAC != "" {
		ha.events.Emit("host-settings", control.EventNote, "", "the host's system proxy settings use a PAC file ("+c.proxy.PAC+"), which vmdock does not evaluate; set proxy: in the config or HTTPS_PROXY for the guest")
	}
	ha.mu.Lock()
	ha.boot.corp = c
	ha.mu.Unlock()
	return nil
}

// setup adds the CA set and proxy to the guest's setup.
func (c corpNet) setup(s *agent.Setup) {
	s.CACerts = c.certs.PEMs()
	if p := c.proxy.Settings; p.HTTP != "" || p.HTTPS != "" {
		s.Proxy = &agent.Proxy{HTTP: p.HTTP, HTTPS: p.HTTPS, NoProxy: p.NoProxy}
	}
}

// fingerprint is the CA set's hash and the proxy's: a resumed dockerd must
// not keep an old trust pool or proxy. The proxy is hashed, so its
// credentials are not written to the saved state's record.
func (c corpNet) fingerprint() (certs, proxyHash string) {
	b, _ := json.Marshal(c.proxy.Settings)
	sum := sha256.Sum256(b)
	return c.certs.Hash(), "sha256:" + hex.EncodeToString(sum[:])
}

// status is the proxy in effect with credentials masked, for `status`.
func (c corpNet) status() *control.ProxyStatus {
	p := c.proxy
	if p.HTTP == "" && p.HTTPS == "" && p.PAC == "" {
		return nil
	}
	m := p.Masked()
	return &control.ProxyStatus{HTTP: m.HTTP, HTTPS: m.HTTPS, NoProxy: m.NoProxy, Source: p.Source, PAC: p.PAC}
}

// String is a one-line account for logs.
func (c corpNet) String() string {
	return fmt.Sprintf("CA certificates: %s; proxy: %+v", c.certs.Describe(), c.proxy.Masked())
}
