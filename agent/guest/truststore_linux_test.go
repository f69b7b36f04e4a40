package guest

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent"
)

// realOpenSSL runs openssl for real and every other command through the
// fake, so the hash links are the ones OpenSSL makes.
type realOpenSSL struct{ *fakeOS }

func (r realOpenSSL) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if name != "openssl" {
		return r.fakeOS.Run(ctx, name, args...)
	}
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

func trustStoreServer(t *testing.T, system ...string) (*Server, *fakeOS) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("openssl is missing")
		}
		t.Skip("openssl is missing")
	}
	s, fos := newTestServer(t)
	s.OS = realOpenSSL{fos}
	must(t, os.MkdirAll(s.path(etcCertsDir), 0o755))
	must(t, os.WriteFile(s.path(caBundle), []byte(strings.Join(system, "")), 0o644))
	return s, fos
}

// bundleNames is the common names of the bundle's certificates, in order.
func bundleNames(t *testing.T, s *Server) []string {
	t.Helper()
	b, err := os.ReadFile(s.path(caBundle))
	must(t, err)
	var names []string
	for {
		blk, rest := pem.Decode(b)
		if blk == nil {
			break
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		must(t, err)
		names, b = append(names, c.Subject.CommonName), rest
	}
	return names
}

// hashLinked says whether OpenSSL's subject-hash folder finds pemText.
func hashLinked(t *testing.T, s *Server, pemText string) bool {
	t.Helper()
	f := filepath.Join(t.TempDir(), "c.pem")
	must(t, os.WriteFile(f, []byte(pemText), 0o644))
	out, err := exec.Command("openssl", "x509", "-hash", "-noout", "-in", f).Output()
	must(t, err)
	links, _ := filepath.Glob(filepath.Join(s.path(etcCertsDir), strings.TrimSpace(string(out))+".*"))
	for _, l := range links {
		if b, err := os.ReadFile(l); err == nil && string(b) == pemText {
			return true
		}
	}
	return false
}

func TestTrustStoreEditedInPlaceWithoutUpdateCACertificates(t *testing.T) {
	// Text between certificates stays as the file has it.
	sys1, sys2 := "# sys1\n"+testCA(t, "sys1"), testCA(t, "sys2")
	s, fos := trustStoreServer(t, sys1, sys2)
	ctx := context.Background()
	a := testCA(t, "a")

	// The host sends a CA of its own and one the guest has already.
	must(t, s.corpNet(ctx, agent.Setup{CACerts: []string{a, sys2}}))
	names := bundleNames(t, s)
	if len(names) != 4 || names[0] != "sys1" || names[1] != "sys2" {
		t.Fatalf("bundle after adding a and sys2: %v", names)
	}
	if strings.Join(names[2:], ",") != "a,sys2" && strings.Join(names[2:], ",") != "sys2,a" {
		t.Fatalf("bundle after adding a and sys2: %v", names)
	}
	if strings.Contains(fos.ran(), "update-ca-certificates") {
		t.Fatalf("a plain store must not need update-ca-certificates: %s", fos.ran())
	}
	for _, name := range crtFiles(t, s) {
		b, err := os.ReadFile(s.path(certLink(name)))
		if err != nil || (string(b) != a && string(b) != sys2) {
			t.Errorf("link for %s: %q %v", name, b, err)
		}
	}
	if !hashLinked(t, s, a) {
		t.Errorf("no subject-hash link finds a")
	}

	// a goes: its bundle entry and link go; the system's sys2 stays once,
	// the host's copy of it stays too.
	must(t, s.corpNet(ctx, agent.Setup{CACerts: []string{sys2}}))
	if got := strings.Join(bundleNames(t, s), ","); got != "sys1,sys2,sys2" {
		t.Fatalf("bundle after removing a: %s", got)
	}
	if links, _ := filepath.Glob(filepath.Join(s.path(etcCertsDir), "*.pem")); len(links) != 1 || hashLinked(t, s, a) {
		t.Fatalf("links after removing a: %v (a's hash link left: %v)", links, hashLinked(t, s, a))
	}
	// None left: the bundle is the system's again, byte for byte.
	must(t, s.corpNet(ctx, agent.Setup{}))
	b, err := os.ReadFile(s.path(caBundle))
	must(t, err)
	if string(b) != sys1+sys2 {
		t.Fatalf("bundle after removing all: %q", b)
	}
	if links, _ := filepath.Glob(filepath.Join(s.path(etcCertsDir), "*.pem")); len(links) != 0 {
		t.Fatalf("links left: %v", links)
	}
	if strings.Contains(fos.ran(), "update-ca-certificates") {
		t.Fatalf("ran %s", fos.ran())
	}
}

func TestTrustStoreWithHooksOrNoBundleUsesUpdateCACertificates(t *testing.T) {
	ctx := context.Background()
	s, fos := trustStoreServer(t, testCA(t, "sys"))
	must(t, os.MkdirAll(s.path(caHooksDir), 0o755))
	must(t, os.WriteFile(filepath.Join(s.path(caHooksDir), "jks-keystore"), []byte("#!/bin/sh\n"), 0o755))
	must(t, s.corpNet(ctx, agent.Setup{CACerts: []string{testCA(t, "a")}}))
	if !strings.Contains(fos.ran(), "update-ca-certificates --fresh") {
		t.Fatalf("hooks: want update-ca-certificates, ran %s", fos.ran())
	}

	s, fos = trustStoreServer(t)
	must(t, os.Remove(s.path(caBundle)))
	must(t, s.corpNet(ctx, agent.Setup{CACerts: []string{testCA(t, "a")}}))
	if !strings.Contains(fos.ran(), "update-ca-certificates --fresh") {
		t.Fatalf("no bundle: want update-ca-certificates, ran %s", fos.ran())
	}

	// A bundle with something else in it is not edited.
	s, fos = trustStoreServer(t, testCA(t, "sys")+"not a certificate\n")
	must(t, s.corpNet(ctx, agent.Setup{CACerts: []string{testCA(t, "a")}}))
	if !strings.Contains(fos.ran(), "update-ca-certificates --fresh") {
		t.Fatalf("odd bundle: want update-ca-certificates, ran %s", fos.ran())
	}
}
