package hostagent

import (
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
	"github.com/vmdock/vmdock/network/proxy"
	"github.com/vmdock/vmdock/vm/config"
)

func caFile(t *testing.T, dir, name string) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func corpCfg(files ...string) config.Config {
	c := config.Default(config.Host{OS: "linux", Arch: "amd64", CPUs: 2})
	c.HostCACerts = false // the test host's own folder is not the test's
	c.CACerts = files
	return c
}

func noEnv(string) string { return "" }

func TestReadCorpNetBadPEMNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "corp-ca.pem")
	os.WriteFile(bad, []byte("not a certificate\n"), 0o644)
	_, err := readCorpNet(corpCfg(caFile(t, dir, "good"), bad), noEnv, nil)
	if err == nil || !strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a bad PEM file: %v; want one line naming %s", err, bad)
	}
}

func TestCorpNetSetupStatusAndFingerprint(t *testing.T) {
	dir := t.TempDir()
	a, b := caFile(t, dir, "a"), caFile(t, dir, "b")
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	proxied := env(map[string]string{"https_proxy": "http://alice:s3cret@127.0.0.1:3128", "NO_PROXY": "host.docker.internal"})

	c, err := readCorpNet(corpCfg(a), proxied, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := c.status()
	if st == nil || st.HTTPS != "http://***@10.254.254.254:3128" || st.Source != proxy.SourceEnv || st.NoProxy != "host.docker.internal" {
		t.Fatalf("status: %+v; want the loopback proxy at the host access address, masked, from the environment", st)
	}
	setup := setupOf(c)
	if len(setup.CACerts) != 1 || setup.Proxy == nil || setup.Proxy.HTTPS != "http://alice:s3cret@10.254.254.254:3128" {
		t.Fatalf("setup: %d certs, proxy %+v", len(setup.CACerts), setup.Proxy)
	}

	ca0, px0 := c.fingerprint()
	if strings.Contains(px0, "s3cret") {
		t.Fatalf("the proxy's credentials in the fingerprint")
	}
	c2, _ := readCorpNet(corpCfg(a, b), proxied, nil)
	if ca, px := c2.fingerprint(); ca == ca0 || px != px0 {
		t.Errorf("a CA added: the CA hash must change and the proxy's not")
	}
	c3, _ := readCorpNet(corpCfg(a), env(map[string]string{"HTTPS_PROXY": "http://other:3128"}), nil)
	if ca, px := c3.fingerprint(); ca != ca0 || px == px0 {
		t.Errorf("another proxy: the proxy hash must change and the CA's not")
	}
	c4, _ := readCorpNet(corpCfg(), noEnv, nil)
	if c4.status() != nil || setupOf(c4).Proxy != nil || len(setupOf(c4).CACerts) != 0 {
		t.Errorf("nothing set: status %+v, setup %+v", c4.status(), setupOf(c4))
	}
	// The config's proxy wins over the environment.
	cfg := corpCfg()
	cfg.Proxy = proxy.Settings{HTTP: "http://cfg.corp:8080"}
	c5, _ := readCorpNet(cfg, proxied, nil)
	if st := c5.status(); st.HTTP != "http://cfg.corp:8080" || st.HTTPS != "" || st.Source != proxy.SourceConfig {
		t.Errorf("config proxy: %+v", st)
	}
	cfg.Proxy = proxy.Settings{HTTP: "cfg.corp:8080"}
	if _, err := readCorpNet(cfg, noEnv, nil); err == nil || !strings.Contains(err.Error(), "proxy.http") {
		t.Errorf("a bad proxy URL: %v", err)
	}
}

func setupOf(c corpNet) agent.Setup {
	var s agent.Setup
	c.setup(&s)
	return s
}

// The host's settings are read before the saved state is judged (the
// fingerprint holds them) and the guest gets them in setup, before the
// runtime starts.
func TestHostSettingsStepOrder(t *testing.T) {
	ha := &hostAgent{}
	pos := map[string]int{}
	for i, s := range ha.bootSteps() {
		pos[s.name] = i
	}
	hs, ok := pos["host-settings"]
	if !ok || hs > pos["saved-state"] || pos["setup"] > pos["docker"] {
		t.Errorf("steps %v: want host-settings before saved-state, setup before docker", pos)
	}
}
