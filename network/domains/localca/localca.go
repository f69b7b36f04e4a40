// Package localca is the certificate authority behind https://<name>.
// vmdock.localhost: one per $VMDOCK_HOME, made on first use, its key never
// leaving the host. The CA carries a critical X.509 name constraint
// permitting only vmdock.localhost and the names under it, and no IP
// address, so a copy of its key cannot mint a certificate any verifier
// accepts for another site, even on a machine that trusts the CA.
package localca

import (
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vmdock/vmdock/internal/atomicfile"

	"github.com/vmdock/vmdock/network/domains"
)

// DirName is the CA's folder under $VMDOCK_HOME; the leading "_" keeps
// it from ever being taken for a profile.
const DirName = "_domains-ca"

const (
	certFile = "ca.pem"
	keyFile  = "ca-key.pem"
	// Leaves are short-lived (browsers cap leaf lifetimes) and made again
	// before they run out, so nothing on disk needs renewing.
	leafLifetime = 90 * 24 * time.Hour
	leafRenew    = 7 * 24 * time.Hour
	// maxCached bounds the in-memory leaves; past it the least recently
	// used one goes.
	maxCached = 1024
)

// CA signs leaf certificates for names under vmdock.localhost.
type CA struct {
	dir  string
	cert *x509.Certificate
	key  crypto.Signer

	mu sync.Mutex
	// leaves is the cache: name -> element of lru, whose values are
	// *cachedLeaf, the most recently used first.
	leaves map[string]*list.Element
	lru    *list.List
	// signing holds the signatures under way, so callers for one name
	// share one and the lock is not held while signing.
	signing map[string]*signCall
	now     func() time.Time
	// signHook, when set (tests), runs at the start of each signature.
	signHook func(name string)
}

type cachedLeaf struct {
	name string
	cert *tls.Certificate
}

// signCall is one signature under way; done closes when cert and err
// are set.
type signCall struct {
	done chan struct{}
	cert *tls.Certificate
	err  error
}

// Path is the CA certificate's PEM file under home ($VMDOCK_HOME).
func Path(home string) string { return filepath.Join(home, DirName, certFile) }

// Open loads home's CA, making it first if there is none. Two processes
// making it at once end with the same CA: it is written to a scratch
// folder and renamed into place, and the loser loads the winner's.
func Open(home string) (*CA, error) {
	dir := filepath.Join(home, DirName)
	ca, err := load(dir)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return ca, err
	}
	// The CA may be the first thing in a new home, which later holds
	// instance sockets and keys: owner only, as vm/store makes it.
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("local CA: %w", err)
	}
	tmp, err := os.MkdirTemp(home, "."+DirName+"-")
	if err != nil {
		return nil, fmt.Errorf("local CA: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := create(tmp); err != nil {
		return nil, err
	}
	if err := atomicfile.PlaceDir(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, certFile)); statErr != nil {
			return nil, fmt.Errorf("local CA: put it in place at %s: %w", dir, err)
		}
	}
	return load(dir)
}

func load(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, certFile))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, keyFile))
	if err != nil {
		return nil, fmt.Errorf("local CA: %s has a certificate but no key: %w", dir, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("local CA in %s: %w", dir, err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("local CA in %s: the key cannot sign", dir)
	}
	return &CA{dir: dir, cert: pair.Leaf, key: signer, leaves: map[string]*list.Element{}, lru: list.New(),
		signing: map[string]*signCall{}, now: time.Now}, nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// everyIP excludes all IP addresses: the CA is for names only.
var everyIP = []*net.IPNet{
	{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
	{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)},
}

func create(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("local CA: key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return fmt.Errorf("local CA: serial: %w", err)
	}
	host, _ := os.Hostname()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                sn,
		Subject:                     pkix.Name{CommonName: "vmdock local CA " + host, Organization: []string{"vmdock container domains"}},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.AddDate(10, 0, 0),
		IsCA:                        true,
		BasicConstraintsValid:       true,
		MaxPathLenZero:              true,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         []string{domains.Suffix},
		ExcludedIPRanges:            everyIP,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("local CA: certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("local CA: key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("local CA: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("local CA: %w", err)
	}
	return nil
}

// CertPath is the CA certificate's PEM file, the one trust stores take.
func (ca *CA) CertPath() string { return filepath.Join(ca.dir, certFile) }

// Certificate is the CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Leaf is a certificate for name, made on first use and kept while it has
// more than leafRenew to run. Only DNS host names under the suffix are
// signed.
func (ca *CA) Leaf(name string) (*tls.Certificate, error) {
	name = domains.HostName(name)
	if !domains.Under(name) {
		return nil, fmt.Errorf("local CA: name %q is not accepted; accepted: names under %s", name, domains.Suffix)
	}
	if err := domains.CheckHostName(name); err != nil {
		return nil, fmt.Errorf("local CA: %w", err)
	}
	ca.mu.Lock()
	now := ca.now()
	if c := ca.cached(name, now); c != nil {
		ca.mu.Unlock()
		return c, nil
	}
	if call := ca.signing[name]; call != nil {
		ca.mu.Unlock()
		<-call.done
		return call.cert, call.err
	}
	call := &signCall{done: make(chan struct{})}
	ca.signing[name] = call
	ca.mu.Unlock()

	call.cert, call.err = ca.sign(name, now)
	ca.mu.Lock()
	delete(ca.signing, name)
	if call.err == nil {
		ca.store(name, call.cert)
	}
	ca.mu.Unlock()
	close(call.done)
	return call.cert, call.err
}

// cached is name's leaf if it has more than leafRenew to run, marked as
// just used; ca.mu is held.
func (ca *CA) cached(name string, now time.Time) *tls.Certificate {
	e := ca.leaves[name]
	if e == nil {
		return nil
	}
	c := e.Value.(*cachedLeaf).cert
	if c.Leaf.NotAfter.Sub(now) <= leafRenew {
		return nil
	}
	ca.lru.MoveToFront(e)
	return c
}

// store caches name's leaf, dropping the least recently used past
// maxCached; ca.mu is held.
func (ca *CA) store(name string, c *tls.Certificate) {
	if e := ca.leaves[name]; e != nil {
		e.Value.(*cachedLeaf).cert = c
		ca.lru.MoveToFront(e)
		return
	}
	ca.leaves[name] = ca.lru.PushFront(&cachedLeaf{name: name, cert: c})
	for ca.lru.Len() > maxCached {
		oldest := ca.lru.Back()
		ca.lru.Remove(oldest)
		delete(ca.leaves, oldest.Value.(*cachedLeaf).name)
	}
}

func (ca *CA) sign(name string, now time.Time) (*tls.Certificate, error) {
	if ca.signHook != nil {
		ca.signHook(name)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("local CA: leaf key for %s: %w", name, err)
	}
	sn, err := serial()
	if err != nil {
		return nil, fmt.Errorf("local CA: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("local CA: leaf for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("local CA: leaf for %s: %w", name, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// GetCertificate is tls.Config.GetCertificate: the leaf for the SNI name.
// A client that sends no name (https://127.0.0.1) gets none.
func (ca *CA) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if hello.ServerName == "" {
		return nil, fmt.Errorf("local CA: the client sent no server name; use https://<name>.%s", domains.Suffix)
	}
	return ca.Leaf(hello.ServerName)
}
