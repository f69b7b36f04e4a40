package corpnet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

func testCA(t *testing.T, name string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func crtFiles(t *testing.T, s *CorpNet) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(s.Path(guestCADir), "*"))
	var names []string
	for _, p := range m {
		names = append(names, filepath.Base(p))
	}
	return names
}

func TestCACertsInstallOnlyWhenTheSetChanges(t *testing.T) {
	s, fos := newTestServer(t)
	ctx := context.Background()
	a, b := testCA(t, "a"), testCA(t, "b")
	runs := func() int { return strings.Count(fos.Ran(), "update-ca-certificates --fresh") }

	// A guest that never had any: nothing to do, nothing run.
	must(t, s.Apply(ctx, agent.Setup{}))
	if fos.Ran() != "" {
		t.Fatalf("no CAs, none before: ran %q", fos.Ran())
	}

	must(t, s.Apply(ctx, agent.Setup{CACerts: []string{a, b}}))
	if got := crtFiles(t, s); len(got) != 2 || !strings.HasSuffix(got[0], ".crt") || runs() != 1 {
		t.Fatalf("two CAs: files %v, update runs %d", got, runs())
	}
	if !strings.Contains(fos.Ran(), "systemctl try-restart containerd.service docker.service") {
		t.Errorf("a changed trust store must restart the daemons that run: %s", fos.Ran())
	}
	// The same set, in another order (another boot): nothing runs.
	before := fos.Ran()
	must(t, s.Apply(ctx, agent.Setup{CACerts: []string{b, a}}))
	if fos.Ran() != before {
		t.Fatalf("unchanged set ran: %q", strings.TrimPrefix(fos.Ran(), before))
	}
	// A CA removed on the host goes away.
	must(t, s.Apply(ctx, agent.Setup{CACerts: []string{b}}))
	bb, _ := os.ReadFile(filepath.Join(s.Path(guestCADir), crtFiles(t, s)[0]))
	if got := crtFiles(t, s); len(got) != 1 || string(bb) != b || runs() != 2 {
		t.Fatalf("after removing a: files %v, update runs %d", got, runs())
	}
	// None left: the folder goes, the store is rebuilt once.
	must(t, s.Apply(ctx, agent.Setup{}))
	if _, err := os.Stat(s.Path(guestCADir)); !os.IsNotExist(err) || runs() != 3 {
		t.Fatalf("empty set: folder %v, update runs %d", err, runs())
	}
	must(t, s.Apply(ctx, agent.Setup{}))
	if runs() != 3 {
		t.Fatalf("empty again: update ran again")
	}
	if _, err := os.Stat(s.Path(guestCADir + ".new")); !os.IsNotExist(err) {
		t.Errorf("the staging folder is left behind")
	}
}

func TestCACertsBadOneInstallsNothing(t *testing.T) {
	s, fos := newTestServer(t)
	ctx := context.Background()
	a := testCA(t, "a")
	must(t, s.Apply(ctx, agent.Setup{CACerts: []string{a}}))
	before := fos.Ran()
	err := s.Apply(ctx, agent.Setup{CACerts: []string{testCA(t, "b"), "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}})
	if err == nil || !strings.Contains(err.Error(), "certificate 2") {
		t.Fatalf("a bad second certificate: %v", err)
	}
	if got := crtFiles(t, s); len(got) != 1 || fos.Ran() != before {
		t.Fatalf("half installed: files %v, ran %q", got, strings.TrimPrefix(fos.Ran(), before))
	}
	// A failed rebuild is retried at the next setup: no hash is kept.
	fos.Results = map[string]error{"update-ca-certificates": guestostest.ExitErr(1)}
	if err := s.Apply(ctx, agent.Setup{CACerts: []string{testCA(t, "c")}}); err == nil {
		t.Fatal("update-ca-certificates failed: want the error")
	}
	fos.Results = nil
	n := strings.Count(fos.Ran(), "update-ca-certificates")
	must(t, s.Apply(ctx, agent.Setup{CACerts: []string{a}}))
	if strings.Count(fos.Ran(), "update-ca-certificates") != n+1 {
		t.Errorf("after a failed rebuild the next setup must rebuild")
	}
}

func TestProxyAppliedToDaemonsAndTools(t *testing.T) {
	s, fos := newTestServer(t)
	ctx := context.Background()
	must(t, os.MkdirAll(filepath.Join(s.Root, filepath.Dir(guestos.BuildkitUnit)), 0o755))
	must(t, os.WriteFile(filepath.Join(s.Root, guestos.BuildkitUnit), nil, 0o644))
	must(t, os.WriteFile(s.Path(etcEnv), []byte("LANG=\"C.UTF-8\"\nhttp_proxy=\"http://stale:1\"\n"), 0o644))
	p := &agent.Proxy{HTTP: "http://u:p%40ss@10.254.254.254:3128", HTTPS: "http://10.254.254.254:3128", NoProxy: "host.docker.internal,.corp"}
	must(t, s.Apply(ctx, agent.Setup{Proxy: p}))
	for _, u := range proxyUnits {
		b, err := os.ReadFile(s.Path(filepath.Join("/etc/systemd/system", u+".service.d", proxyDropIn)))
		if err != nil {
			t.Fatalf("%s drop-in: %v", u, err)
		}
		for _, want := range []string{"[Service]\n", `Environment="HTTP_PROXY=http://u:p%%40ss@10.254.254.254:3128"`,
			`Environment="https_proxy=http://10.254.254.254:3128"`, `Environment="NO_PROXY=host.docker.internal,.corp"`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s drop-in lacks %s:\n%s", u, want, b)
			}
		}
	}
	apt, _ := os.ReadFile(s.Path(aptProxyConf))
	if !strings.Contains(string(apt), `Acquire::https::Proxy "http://10.254.254.254:3128";`) {
		t.Errorf("apt conf:\n%s", apt)
	}
	env, _ := os.ReadFile(s.Path(etcEnv))
	if !strings.HasPrefix(string(env), "LANG=\"C.UTF-8\"\n") || strings.Contains(string(env), "stale") ||
		!strings.Contains(string(env), "no_proxy=\"host.docker.internal,.corp\"\n") {
		t.Errorf("/etc/environment:\n%s", env)
	}
	if want := "systemctl daemon-reload\nsystemctl try-restart containerd.service docker.service buildkit.service"; fos.Ran() != want {
		t.Errorf("ran %q, want %q", fos.Ran(), want)
	}
	if got := s.WithProxyVars(map[string]string{"NO_PROXY": "mine"}); got["HTTPS_PROXY"] != p.HTTPS || got["NO_PROXY"] != "mine" {
		t.Errorf("exec environment: %v; want the proxy, the request's own values winning", got)
	}
	// The same proxy again (the next boot): nothing to reload or restart.
	before := fos.Ran()
	must(t, s.Apply(ctx, agent.Setup{Proxy: p}))
	if fos.Ran() != before {
		t.Errorf("unchanged proxy ran %q", strings.TrimPrefix(fos.Ran(), before))
	}
	// The proxy gone on the host: gone in the guest.
	must(t, s.Apply(ctx, agent.Setup{}))
	if m, _ := filepath.Glob(s.Path("/etc/systemd/system/*.service.d/" + proxyDropIn)); len(m) != 0 {
		t.Errorf("drop-ins left: %v", m)
	}
	if _, err := os.Stat(s.Path(aptProxyConf)); !os.IsNotExist(err) {
		t.Errorf("apt conf left")
	}
	if env, _ := os.ReadFile(s.Path(etcEnv)); string(env) != "LANG=\"C.UTF-8\"\n" {
		t.Errorf("/etc/environment after removal: %q", env)
	}
	if got := s.WithProxyVars(nil); len(got) != 0 {
		t.Errorf("exec environment after the proxy went: %v", got)
	}
	if n := strings.Count(fos.Ran(), "try-restart"); n != 2 {
		t.Errorf("restarts: %d, want 2 (set, removed)", n)
	}
}
