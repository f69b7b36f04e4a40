package usernet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/vmdock/vmdock/network/egress"
	"github.com/vmdock/vmdock/network/inject"
)

// A sandbox's HTTPS request to a secret's host reaches the real server
// with the credential set by the host agent (over whatever the guest
// sent), and the guest, which trusts the sandbox's CA for that host only,
// never sees it; TLS to another allowed host passes through untouched,
// the guest talking to the real server's certificate. Real HTTPS servers
// and a dnsmasq on test addresses, in the test's own namespaces.
func TestSandboxInjectsSecretOnTheWayOut(t *testing.T) {
	if !inNamespaces(t, netMountNS, "ip", "dnsmasq") {
		return
	}
	testAddresses(t, "198.18.0.1", "198.18.0.2", "198.18.0.53")
	dir := t.TempDir()
	bindOver(t, dir, "/etc/resolv.conf", "nameserver 198.18.0.53\noptions timeout:1 attempts:1\n")
	bindOver(t, dir, "/etc/hosts", "127.0.0.1 localhost\n")
	startDnsmasqAnswering(t, "198.18.0.53", "/allowed.test/198.18.0.9", "/api.secret.test/198.18.0.1", "/plain.test/198.18.0.2")
	upstreamCert, upstreamPool := selfSigned(t, "api.secret.test", "plain.test")
	secretSaw := serveHTTPS(t, "198.18.0.1:443", upstreamCert)
	plainSaw := serveHTTPS(t, "198.18.0.2:443", upstreamCert)

	policy, err := egress.New([]string{"api.secret.test:443", "plain.test:443"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := inject.LoadOrCreateCA(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"), []string{"api.secret.test"})
	if err != nil {
		t.Fatal(err)
	}
	proxy := inject.New(ca, []inject.Secret{{Host: "api.secret.test", Header: "Authorization", Value: "Bearer s3cret"}})
	proxy.Upstream = upstreamPool
	guest := guestClient(t, newStack(t, Config{Egress: policy, Secrets: proxy}))

	sandboxCA := x509.NewCertPool()
	sandboxCA.AppendCertsFromPEM(ca.PEM)
	body, err := httpsGetFromGuest(guest, "api.secret.test", sandboxCA)
	if err != nil {
		t.Fatalf("GET https://api.secret.test from the guest: %v", err)
	}
	if got := secretSaw(); got != "Bearer s3cret" {
		t.Errorf("the secret's host saw Authorization %q, want the injected one", got)
	}
	if strings.Contains(body, "s3cret") || body != "hello from the real server\n" {
		t.Errorf("the guest got %q", body)
	}
	if _, err := httpsGetFromGuest(guest, "plain.test", sandboxCA); err == nil {
		t.Error("the guest trusted a certificate for plain.test from the sandbox CA")
	}
	if _, err := httpsGetFromGuest(guest, "plain.test", upstreamPool); err != nil {
		t.Fatalf("GET https://plain.test (no secret) from the guest: %v", err)
	}
	if got := plainSaw(); got != "Bearer guest" {
		t.Errorf("the plain host saw Authorization %q, want the guest's own", got)
	}
	if c, _ := x509.ParseCertificate(pemBlock(t, ca.PEM)); c == nil || !slices.Equal(c.PermittedDNSDomains, []string{"api.secret.test"}) || !c.PermittedDNSDomainsCritical {
		t.Error("the sandbox CA is not constrained to the secrets' hosts")
	}
}

// httpsGetFromGuest resolves host through the stack's DNS and GETs
// https://host/ from the guest, trusting roots, with an Authorization of
// the guest's own.
func httpsGetFromGuest(guest *stack.Stack, host string, roots *x509.CertPool) (string, error) {
	ips, err := query(guest, DNSIP, host+".", 5*time.Second)
	if err != nil || len(ips) == 0 {
		return "", fmt.Errorf("resolve %s: %v %v", host, ips, err)
	}
	client := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, _, a string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(a)
			p, _ := strconv.Atoi(port)
			return dialFromGuest(ctx, guest, ips[0], p)
		},
	}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest("GET", "https://"+host+"/", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer guest")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// serveHTTPS serves on addr; the function returns the Authorization the
// last request carried.
func serveHTTPS(t *testing.T, addr string, cert tls.Certificate) func() string {
	t.Helper()
	ln, err := tls.Listen("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var saw string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		saw = r.Header.Get("Authorization")
		mu.Unlock()
		io.WriteString(w, "hello from the real server\n")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return func() string { mu.Lock(); defer mu.Unlock(); return saw }
}

func selfSigned(t *testing.T, hosts ...string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "upstream"}, DNSNames: hosts,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func pemBlock(t *testing.T, b []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("not PEM")
	}
	return block.Bytes
}
