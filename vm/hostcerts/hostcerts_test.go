package hostcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newCA makes a throwaway self-signed CA certificate, PEM-encoded.
func newCA(t *testing.T, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func write(t *testing.T, p string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParse(t *testing.T) {
	a, b := newCA(t, "a"), newCA(t, "b")
	certs, err := Parse("bundle", append(append([]byte("comment line\n"), a...), b...))
	if err != nil || len(certs) != 2 {
		t.Fatalf("a bundle of two: %d certs, %v", len(certs), err)
	}
	if string(certs[0].PEM) != string(a) {
		t.Errorf("first cert's PEM is not the input's")
	}
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}})
	garbled := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})
	for name, in := range map[string][]byte{
		"empty":       nil,
		"not PEM":     []byte("hello\n"),
		"a key":       append(append([]byte{}, a...), key...),
		"garbled DER": garbled,
		"cut short":   append(append([]byte{}, a...), b[:len(b)/2]...),
	} {
		if _, err := Parse("f.pem", in); err == nil || !strings.Contains(err.Error(), "f.pem") {
			t.Errorf("%s: want an error naming the file, got %v", name, err)
		}
	}
}

func TestReadFileNamesTheBadFile(t *testing.T) {
	dir := t.TempDir()
	good := write(t, filepath.Join(dir, "good.pem"), newCA(t, "good"))
	bad := write(t, filepath.Join(dir, "bad.pem"), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	_, err := Collect(Options{Files: []string{good, bad}})
	if err == nil {
		t.Fatal("a bad file: want an error")
	}
	if msg := err.Error(); !strings.Contains(msg, bad) || strings.Contains(msg, "\n") || strings.Contains(msg, good) {
		t.Errorf("error %q: want one line naming %s only", msg, bad)
	}
	_, err = Collect(Options{Files: []string{filepath.Join(dir, "missing.pem")}})
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("a missing file: %v", err)
	}
}

func TestCollectDedupsAndHashes(t *testing.T) {
	dir := t.TempDir()
	a, b := newCA(t, "a"), newCA(t, "b")
	fa := write(t, filepath.Join(dir, "a.pem"), a)
	fab := write(t, filepath.Join(dir, "ab.pem"), append(append([]byte{}, b...), a...))
	host := func() ([]Cert, error) { return Parse("host", b) }
	s1, err := Collect(Options{Files: []string{fa, fab}, Host: true, hostCerts: host})
	if err != nil || len(s1.Certs) != 2 {
		t.Fatalf("got %d certs, %v; want a and b once each", len(s1.Certs), err)
	}
	s2, _ := Collect(Options{Files: []string{fab}})
	if s1.Hash() != s2.Hash() {
		t.Errorf("the same two certs from other files hash differently")
	}
	s3, _ := Collect(Options{Files: []string{fa}, Host: false, hostCerts: host})
	if s3.Hash() == s1.Hash() || len(s3.Certs) != 1 {
		t.Errorf("with the host's cert left out, the set must differ")
	}
	if (Set{}).Hash() == s3.Hash() {
		t.Errorf("the empty set hashes like a set of one")
	}
	// An unreadable host store is left out, not an error.
	s4, err := Collect(Options{Files: []string{fa}, Host: true, hostCerts: func() ([]Cert, error) { return nil, errors.New("no") }})
	if err != nil || s4.Hash() != s3.Hash() {
		t.Errorf("unreadable host store: %v", err)
	}
}

func TestFolderCerts(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "corp.crt"), newCA(t, "corp"))
	write(t, filepath.Join(dir, "sub", "deep", "proxy.crt"), newCA(t, "proxy"))
	write(t, filepath.Join(dir, "sub", "other.pem"), newCA(t, "other"))
	write(t, filepath.Join(dir, "README"), []byte("not a cert"))
	write(t, filepath.Join(dir, "broken.crt"), []byte("not a cert"))
	certs, err := FolderCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(certs) != 3 {
		t.Fatalf("got %d certs, want corp, proxy and other (broken.crt and README skipped)", len(certs))
	}
	var srcs []string
	for _, c := range certs {
		srcs = append(srcs, filepath.Base(c.Source))
	}
	if got := strings.Join(srcs, ","); got != "corp.crt,proxy.crt,other.pem" {
		t.Errorf("sources %s", got)
	}
	if certs, err := FolderCerts(filepath.Join(dir, "absent")); err != nil || len(certs) != 0 {
		t.Errorf("a missing folder: %d certs, %v; want none and no error", len(certs), err)
	}
}

func mustParse(t *testing.T, b []byte) []Cert {
	t.Helper()
	c, err := Parse("x", b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
