package localca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func pool(ca *CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Certificate())
	return p
}

func TestOpenMakesOneCAAndKeepsIt(t *testing.T) {
	home := t.TempDir()
	// two processes' first use at once end with one CA
	var wg sync.WaitGroup
	cas := make([]*CA, 4)
	errs := make([]error, 4)
	for i := range cas {
		wg.Add(1)
		go func() { defer wg.Done(); cas[i], errs[i] = Open(home) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		if !cas[i].Certificate().Equal(cas[0].Certificate()) {
			t.Errorf("Open %d made another CA", i)
		}
	}
	st, err := os.Stat(filepath.Join(home, DirName, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", st.Mode().Perm())
	}
	if cas[0].CertPath() != Path(home) {
		t.Errorf("CertPath %s, Path %s", cas[0].CertPath(), Path(home))
	}
	again, err := Open(home)
	if err != nil || !again.Certificate().Equal(cas[0].Certificate()) {
		t.Errorf("a second Open did not load the first CA: %v", err)
	}
	entries, _ := os.ReadDir(home)
	if len(entries) != 1 {
		t.Errorf("home holds %d entries, want only %s (no scratch folders left)", len(entries), DirName)
	}
	c := cas[0].Certificate()
	if !c.IsCA || !c.PermittedDNSDomainsCritical || len(c.PermittedDNSDomains) != 1 || c.PermittedDNSDomains[0] != "vmdock.localhost" {
		t.Errorf("CA constraints: IsCA %v critical %v permitted %v", c.IsCA, c.PermittedDNSDomainsCritical, c.PermittedDNSDomains)
	}
}

func TestLeafVerifiesAndIsCached(t *testing.T) {
	ca, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Leaf("Web.vmdock.localhost")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "web.vmdock.localhost", Roots: pool(ca)}); err != nil {
		t.Errorf("leaf for web.vmdock.localhost does not verify: %v", err)
	}
	if again, _ := ca.Leaf("web.vmdock.localhost"); again != leaf {
		t.Error("a second Leaf made a new certificate")
	}
	// near its end the leaf is made again
	ca.now = func() time.Time { return time.Now().Add(leafLifetime - leafRenew + time.Hour) }
	if renewed, _ := ca.Leaf("web.vmdock.localhost"); renewed == leaf {
		t.Error("a leaf about to expire was served from the cache")
	}
	for _, bad := range []string{"example.com", "vmdock.localhost.evil.com", "evilvmdock.localhost"} {
		if _, err := ca.Leaf(bad); err == nil {
			t.Errorf("Leaf(%q) succeeded", bad)
		}
	}
	if _, err := ca.GetCertificate(&tls.ClientHelloInfo{}); err == nil {
		t.Error("GetCertificate with no SNI name succeeded")
	}
}

// The point of the name constraint: even with the CA's key, a certificate
// for another site fails Go's verifier.
func TestNameConstraintRejectsOtherSites(t *testing.T) {
	ca, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, tc := range []struct {
		name string
		tmpl x509.Certificate
	}{
		{"example.com", x509.Certificate{DNSNames: []string{"example.com"}}},
		{"127.0.0.1", x509.Certificate{IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}},
	} {
		tmpl := tc.tmpl
		tmpl.SerialNumber = big.NewInt(2)
		tmpl.Subject = pkix.Name{CommonName: tc.name}
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.cert, &key.PublicKey, ca.key)
		if err != nil {
			t.Fatal(err)
		}
		forged, _ := x509.ParseCertificate(der)
		_, err = forged.Verify(x509.VerifyOptions{DNSName: tc.name, Roots: pool(ca)})
		var inv x509.CertificateInvalidError
		if !errors.As(err, &inv) || inv.Reason != x509.CANotAuthorizedForThisName {
			t.Errorf("a leaf for %s signed by the CA: verify gave %v, want CANotAuthorizedForThisName", tc.name, err)
		}
	}
}

func TestTLSHandshakeWithTheCA(t *testing.T) {
	ca, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: ca.GetCertificate})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.WriteString(c, "ok"); c.Close() }()
		}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "api.shop.vmdock.localhost", RootCAs: pool(ca)})
	if err != nil {
		t.Fatalf("handshake for api.shop.vmdock.localhost: %v", err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	if string(b) != "ok" {
		t.Errorf("read %q", b)
	}
	if _, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "example.com", RootCAs: pool(ca)}); err == nil {
		t.Error("a handshake for example.com succeeded")
	}
}

// The CA may be the first thing made in $VMDOCK_HOME; the home holds
// instance sockets and keys, so only its owner may enter it.
func TestOpenMakesTheHomePrivate(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if _, err := Open(home); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(home)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("home made with mode %v, want 0700", fi.Mode().Perm())
	}
}

// Only DNS host names are signed: an SNI is whatever a client sends.
func TestLeafRefusesWhatIsNoHostName(t *testing.T) {
	ca, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		strings.Repeat("a", 57<<10) + ".vmdock.localhost",
		"we\x00b.vmdock.localhost",
		"we b.vmdock.localhost",
		"*.vmdock.localhost",
		"web_1.vmdock.localhost",
		"a..vmdock.localhost",
		strings.Repeat("a", 64) + ".vmdock.localhost",
		strings.Repeat(strings.Repeat("a", 60)+".", 4) + "vmdock.localhost", // 261 characters
	} {
		if _, err := ca.Leaf(bad); err == nil {
			t.Errorf("Leaf(%.40q) succeeded", bad)
		}
	}
	for _, good := range []string{"web-1.vmdock.localhost", "API.shop2.vmdock.localhost", strings.Repeat("a", 63) + ".vmdock.localhost"} {
		if _, err := ca.Leaf(good); err != nil {
			t.Errorf("Leaf(%q): %v", good, err)
		}
	}
}

// The cache drops the least recently used leaf, not all of them.
func TestLeafCacheDropsTheLeastRecentlyUsed(t *testing.T) {
	ca, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("n%d.vmdock.localhost", i) }
	first, err := ca.Leaf(name(0))
	if err != nil {
		t.Fatal(err)
	}
	second, _ := ca.Leaf(name(1))
	for i := 2; i < maxCached; i++ {
		if _, err := ca.Leaf(name(i)); err != nil {
			t.Fatal(err)
		}
	}
	if again, _ := ca.Leaf(name(0)); again != first { // name(0) is the most recent use now
		t.Fatal("a cached leaf was made again before the cache was full")
	}
	if _, err := ca.Leaf(name(maxCached)); err != nil { // one past the cap
		t.Fatal(err)
	}
	if again, _ := ca.Leaf(name(0)); again != first {
		t.Error("the most recently used leaf was dropped")
	}
	if again, _ := ca.Leaf(name(1)); again == second {
		t.Error("the least recently used leaf was kept past the cap")
	}
}

// Signing runs outside the lock and once per name: callers for the same
// new name share one signature, and other names are served meanwhile.
func TestLeafSignsOncePerNameOutsideTheLock(t *testing.T) {
	ca, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cached, err := ca.Leaf("cached.vmdock.localhost")
	if err != nil {
		t.Fatal(err)
	}
	var signs atomic.Int32
	inSign, letSign := make(chan struct{}), make(chan struct{})
	ca.signHook = func(name string) {
		signs.Add(1)
		if name == "slow.vmdock.localhost" {
			close(inSign)
			<-letSign
		}
	}
	const callers = 8
	got := make(chan *tls.Certificate, callers)
	go func() { c, _ := ca.Leaf("slow.vmdock.localhost"); got <- c }()
	<-inSign
	for i := 1; i < callers; i++ {
		go func() { c, _ := ca.Leaf("slow.vmdock.localhost"); got <- c }()
	}
	done := make(chan *tls.Certificate)
	go func() { c, _ := ca.Leaf("cached.vmdock.localhost"); done <- c }()
	select {
	case c := <-done:
		if c != cached {
			t.Error("the cached leaf was made again")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cached leaf waited for another name's signing")
	}
	close(letSign)
	first := <-got
	for i := 1; i < callers; i++ {
		if c := <-got; c != first || c == nil {
			t.Errorf("caller %d got another leaf", i)
		}
	}
	if n := signs.Load(); n != 1 {
		t.Errorf("%d signatures for one name asked for at once, want 1", n)
	}
}
