package corpnet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/vmdock/vmdock/internal/atomicfile"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/internal/fsutil"
)

// The guest's trust store additions (Debian: update-ca-certificates reads
// /usr/local/share/ca-certificates recursively) and the digest of the set
// installed there, both on the root disk: a new root disk starts without
// either, and the set is installed again.
const (
	guestCADir = "/usr/local/share/ca-certificates/vmdock"
	caHashFile = "/var/lib/vmdock/ca-certificates.sha256"
)

// proxyDropIn is each daemon's systemd drop-in carrying the proxy, and
// aptProxyConf apt's setting.
const (
	proxyDropIn  = "vmdock-proxy.conf"
	aptProxyConf = "/etc/apt/apt.conf.d/80vmdock-proxy"
	etcEnv       = "/etc/environment"
)

// proxyUnits are the daemons that pull or fetch for users. The agent is
// not among them: its channel to the host never goes through a proxy.
var proxyUnits = []string{"containerd", "docker", "buildkit"}

// CorpNet is the corporate network's part of the guest: the host's CA
// certificates in the trust store and its proxy for the daemons and for
// the commands the host runs.
type CorpNet struct {
	guestos.Sys

	mu sync.Mutex
	// proxyVars is the proxy of the last setup as variables, for exec'd
	// commands (vmdock nerdctl pulls itself, vmdock ssh shells).
	proxyVars map[string]string
}

// Apply installs the host's CA certificates and proxy before the daemons
// start. Daemons read both only when they start, so a running one (a host
// agent that reconnected with other settings) is restarted, and only then.
func (s *CorpNet) Apply(ctx context.Context, st agent.Setup) error {
	caChanged, caErr := s.installCACerts(ctx, st.CACerts)
	if caErr != nil {
		caErr = fmt.Errorf("CA certificates: %w", caErr)
	}
	proxyChanged, proxyErr := s.applyProxy(ctx, st.Proxy)
	if proxyErr != nil {
		proxyErr = fmt.Errorf("proxy: %w", proxyErr)
	}
	var restartErr error
	if caChanged || proxyChanged {
		restartErr = s.restartRunningDaemons(ctx)
	}
	return errors.Join(caErr, proxyErr, restartErr)
}

// installCACerts makes the set in pems the guest's additions to its trust
// store. Every certificate is checked before anything is written, so a bad
// one leaves the store as it was; an unchanged set costs one small read.
func (s *CorpNet) installCACerts(ctx context.Context, pems []string) (bool, error) {
	now, want, err := parseCACerts(pems)
	if err != nil {
		return false, err
	}
	had, err := os.ReadFile(s.Path(caHashFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	before, recErr := s.readBundleRecord()
	noRecord := errors.Is(recErr, os.ErrNotExist)
	if recErr != nil && !noRecord && !errors.Is(recErr, errRecordUnknown) {
		return false, recErr
	}
	if strings.TrimSpace(string(had)) == want {
		if noRecord {
			// Set up by an agent that kept no record: the bundle holds
			// this set, as the set's hash says.
			return false, s.writeBundleRecord(now)
		}
		return false, nil
	}
	dir := s.Path(guestCADir)
	dirThere, stagingThere := fsutil.Exists(dir), fsutil.Exists(dir+".new")
	if noRecord && !dirThere && !stagingThere && len(had) == 0 {
		before = map[string]string{} // never had any: nothing to take away
	}
	if len(now) == 0 && before != nil && len(before) == 0 && !dirThere && !stagingThere {
		return false, nil // none before, none now
	}
	if stagingThere {
		before = nil // cut off while staging: what the bundle holds is not known
	}
	// The recorded set is no longer what the folder holds from here on:
	// a rebuild that fails must be redone at the next setup.
	if err := os.Remove(s.Path(caHashFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	if err := swapCADir(dir, now); err != nil {
		return false, err
	}
	if err := s.rebuildTrustStore(ctx, before, now); err != nil {
		return true, err
	}
	if err := os.MkdirAll(filepath.Dir(s.Path(caHashFile)), 0o755); err != nil {
		return true, err
	}
	s.Log.Info("trust store rebuilt", "vmdock CAs", len(now))
	return true, guestos.WriteFile(s.Path(caHashFile), []byte(want+"\n"), 0o644)
}

// parseCACerts checks pems and returns them as the files of guestCADir
// (file name to PEM) and the digest of the set.
func parseCACerts(pems []string) (map[string][]byte, string, error) {
	files := map[string][]byte{}
	for i, p := range pems {
		blk, rest := pem.Decode([]byte(p))
		if blk == nil || blk.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) > 0 {
			return nil, "", fmt.Errorf("certificate %d is not one PEM CERTIFICATE block", i+1)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, "", fmt.Errorf("certificate %d: %w", i+1, err)
		}
		sum := sha256.Sum256(blk.Bytes)
		files[hex.EncodeToString(sum[:])] = pem.EncodeToMemory(blk)
	}
	digests := make([]string, 0, len(files))
	for d := range files {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	h := sha256.Sum256([]byte(strings.Join(digests, "\n")))
	now := make(map[string][]byte, len(files))
	for _, d := range digests {
		// update-ca-certificates takes *.crt only.
		now[d[:16]+".crt"] = files[d]
	}
	return now, hex.EncodeToString(h[:]), nil
}

// swapCADir makes dir hold the files of now, or removes it for none. The
// new folder is complete (in dir.new) before it replaces the old one.
func swapCADir(dir string, now map[string][]byte) error {
	tmp := dir + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if len(now) > 0 {
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		for name, p := range now {
			if err := guestos.WriteFile(filepath.Join(tmp, name), p, 0o644); err != nil {
				return err
			}
		}
	}
	if len(now) > 0 {
		return atomicfile.SwapDir(tmp, dir)
	}
	return os.RemoveAll(dir)
}

// applyProxy writes the daemons' drop-ins, apt's setting and the login
// environment; nil removes them. It reports whether a drop-in changed.
func (s *CorpNet) applyProxy(ctx context.Context, p *agent.Proxy) (bool, error) {
	env := proxyEnv(p)
	changed := false
	var dropIn []byte
	if len(env) > 0 {
		var b strings.Builder
		b.WriteString("# Written by the vmdock agent: the proxy vmdock start found on the host.\n[Service]\n")
		for _, k := range sortedKeys(env) {
			fmt.Fprintf(&b, "Environment=\"%s=%s\"\n", k, systemdEscape(env[k]))
		}
		dropIn = []byte(b.String())
	}
	for _, u := range proxyUnits {
		c, err := s.syncFile(filepath.Join("/etc/systemd/system", u+".service.d", proxyDropIn), dropIn)
		if err != nil {
			return changed, err
		}
		changed = changed || c
	}
	var apt []byte
	if p != nil && (p.HTTP != "" || p.HTTPS != "") {
		var b strings.Builder
		b.WriteString("// Written by the vmdock agent: the proxy vmdock start found on the host.\n")
		if p.HTTP != "" {
			fmt.Fprintf(&b, "Acquire::http::Proxy %q;\n", p.HTTP)
		}
		if p.HTTPS != "" {
			fmt.Fprintf(&b, "Acquire::https::Proxy %q;\n", p.HTTPS)
		}
		apt = []byte(b.String())
	}
	if _, err := s.syncFile(aptProxyConf, apt); err != nil {
		return changed, err
	}
	if err := s.setEnvProxy(env); err != nil {
		return changed, err
	}
	s.mu.Lock()
	s.proxyVars = env
	s.mu.Unlock()
	if changed {
		if _, err := s.OS.Run(ctx, "systemctl", "daemon-reload"); err != nil {
			return changed, err
		}
	}
	return changed, nil
}

// proxyEnv is p as variables, in both cases: some tools read only one.
func proxyEnv(p *agent.Proxy) map[string]string {
	env := map[string]string{}
	if p == nil {
		return env
	}
	for k, v := range map[string]string{"HTTP_PROXY": p.HTTP, "HTTPS_PROXY": p.HTTPS, "NO_PROXY": p.NoProxy} {
		if v != "" {
			env[k], env[strings.ToLower(k)] = v, v
		}
	}
	if len(env) == 2 && env["NO_PROXY"] != "" {
		return map[string]string{} // a bypass list without a proxy does nothing
	}
	return env
}

var proxyVarNames = map[string]bool{"HTTP_PROXY": true, "HTTPS_PROXY": true, "NO_PROXY": true,
	"http_proxy": true, "https_proxy": true, "no_proxy": true}

// setEnvProxy puts the proxy variables in /etc/environment (login shells,
// `vmdock ssh`), keeping every other line.
func (s *CorpNet) setEnvProxy(env map[string]string) error {
	p := s.Path(etcEnv)
	old, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(old), "\n"), "\n") {
		k, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "export "), "=")
		if l == "" || proxyVarNames[strings.TrimSpace(k)] {
			continue
		}
		lines = append(lines, l)
	}
	for _, k := range sortedKeys(env) {
		lines = append(lines, k+"="+strconv.Quote(env[k]))
	}
	out := strings.Join(lines, "\n")
	if out != "" {
		out += "\n"
	}
	if out == string(old) {
		return nil
	}
	return guestos.WriteFile(p, []byte(out), 0o644)
}

// syncFile makes guest file p hold b, or removes it when b is nil, and
// reports whether that changed anything.
func (s *CorpNet) syncFile(p string, b []byte) (bool, error) {
	full := s.Path(p)
	old, err := os.ReadFile(full)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	if b == nil {
		if !exists {
			return false, nil
		}
		return true, os.Remove(full)
	}
	if exists && bytes.Equal(old, b) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return false, err
	}
	return true, guestos.WriteFile(full, b, 0o644)
}

// restartRunningDaemons restarts the daemons that run, so they read the
// new trust store and proxy; at boot none runs yet and this does nothing.
func (s *CorpNet) restartRunningDaemons(ctx context.Context) error {
	units := []string{"containerd.service", "docker.service"}
	if _, err := os.Stat(s.Path(guestos.BuildkitUnit)); err == nil {
		units = append(units, "buildkit.service")
	}
	_, err := s.OS.Run(ctx, "systemctl", append([]string{"try-restart"}, units...)...)
	return err
}

// systemdEscape quotes v for a double-quoted Environment= assignment: a
// percent sign would be a unit specifier (a %40 in a password).
func systemdEscape(v string) string {
	v = strings.ReplaceAll(v, `\`, `\\`)
	v = strings.ReplaceAll(v, `"`, `\"`)
	return strings.ReplaceAll(v, "%", "%%")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// WithProxyVars is env over the proxy variables: a command the host runs
// in the guest (vmdock nerdctl, which pulls itself) uses the proxy the
// daemons use, unless the request sets its own.
func (s *CorpNet) WithProxyVars(env map[string]string) map[string]string {
	s.mu.Lock()
	pv := s.proxyVars
	s.mu.Unlock()
	if len(pv) == 0 {
		return env
	}
	out := make(map[string]string, len(pv)+len(env))
	for k, v := range pv {
		out[k] = v
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}
