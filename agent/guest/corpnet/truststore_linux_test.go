package corpnet

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

// realOpenSSL runs openssl for real and every other command through the
// fake, so the hash links are the ones OpenSSL makes.
type realOpenSSL struct{ *guestostest.FakeOS }

func (r realOpenSSL) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if name != "openssl" {
		return r.FakeOS.Run(ctx, name, args...)
	}
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

func trustStoreServer(t *testing.T, system ...string) (*CorpNet, *guestostest.FakeOS) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("openssl is missing")
		}
		t.Skip("openssl is missing")
	}
	s, fos := newTestServer(t)
	s.OS = realOpenSSL{fos}
	must(t, os.MkdirAll(s.Path(etcCertsDir), 0o755))
	must(t, os.WriteFile(s.Path(caBundle), []byte(strings.Join(system, "")), 0o644))
	return s, fos
}

// bundleNames is the common names of the bundle's certificates, in order.
func bundleNames(t *testing.T, s *CorpNet) []string {
	t.Helper()
	b, err := os.ReadFile(s.Path(caBundle))
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
func hashLinked(t *testing.T, s *CorpNet, pemText string) bool {
	t.Helper()
	f := filepath.Join(t.TempDir(), "c.pem")
	must(t, os.WriteFile(f, []byte(pemText), 0o644))
	out, err := exec.Command("openssl", "x509", "-hash", "-noout", "-in", f).Output()
	must(t, err)
	links, _ := filepath.Glob(filepath.Join(s.Path(etcCertsDir), strings.TrimSpace(string(out))+".*"))
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
	must(t, s.Apply(ctx, agent.Setup{CACerts: []string{a, sys2}}))
	names := bundleNames(t, s)
	if len(names) != 4 || names[0] != "sys1" || names[1] != "sys2" {
		t.Fatalf("bundle after adding a and sys2: %v", names)
	}
	if strings.Join(names[2:], ",") != "a,sys2" && strings.Join(names[2:], ",") != "sys2,a" {
		t.Fatalf("bundle after adding a and sys2: %v", names)
	}
	if strings.Contains(fos.Ran(), "update-ca-certificates") {
		t.Fatalf("a plain store must not need update-ca-certificates: %s", fos.Ran())
	}
	for _, name := range crtFiles(t, s) {
		b, err := os.ReadFile(s.Path(certLink(name)))
		if err != nil || (string(b) != a && string(b) != sys2) {
			t.Errorf("link for %s: %q %v", name, b, err)
		}
	}
	if !hashLinked(t, s, a) {
		t.Errorf("no subject-hash link finds a")
	}

	// a goes: its bundle entry and link go; the system's sys2 stays once,
	// the host's copy of it stays too.
	must(t, s.Apply(ctx, agent.Setup{CACerts: []string{sys2}}))
	if got := strings.Join(bundleNames(t, s), ","); got != "sys1,sys2,sys2" {
		t.Fatalf("bundle after removing a: %s", got)
	}
	if links, _ := filepath.Glob(filepath.Join(s.Path(etcCertsDir), "*.pem")); len(links) != 1 || hashLinked(t, s, a) {
		t.Fatalf("links after removing a: %v (a's hash link left: %v)", links, hashLinked(t, s, a))
	}
	// None left: the bundle is the system's again, byte for byte.
	must(t, s.Apply(ctx, agent.Setup{}))
	b, err := os.ReadFile(s.Path(caBundle))
	must(t, err)
	if string(b) != sys1+sys2 {
		t.Fatalf("bundle after removing all: %q", b)
	}
	if links, _ := filepath.Glob(filepath.Join(s.Path(etcCertsDir), "*.pem")); len(links) != 0 {
		t.Fatalf("links left: %v", links)
	}
	if strings.Contains(fos.Ran(), "update-ca-certificates") {
		t.Fatalf("ran %s", fos.Ran())
	}
}

func TestTrustStoreWithHooksOrNoBundleUsesUpdateCACertificates(t *testing.T) {
	ctx := context.Background()
	s, fos := trustStoreServer(t, testCA(t, "sys"))
	must(t, os.MkdirAll(s.Path(caHooksDir), 0o755))
	must(t, os.WriteFile(filepath.Join(s.Path(caHooksDir), "jks-keystore"), []byte("#!/bin/sh\n"), 0o755))
	must(t, s.Apply(ctx, agent.Setup{CACerts: []string{testCA(t, "a")}}))
	if !strings.Contains(fos.Ran(), "update-ca-certificates --fresh") {
		t.Fatalf("hooks: want update-ca-certificates, ran %s", fos.Ran())
	}

	s, fos = trustStoreServer(t)
	must(t, os.Remove(s.Path(caBundle)))
	must(t, s.Apply(ctx, agent.Setup{CACerts: []string{testCA(t, "a")}}))
	if !strings.Contains(fos.Ran(), "update-ca-certificates --fresh") {
		t.Fatalf("no bundle: want update-ca-certificates, ran %s", fos.Ran())
	}

	// A bundle with something else in it is not edited.
	s, fos = trustStoreServer(t, testCA(t, "sys")+"not a certificate\n")
	must(t, s.Apply(ctx, agent.Setup{CACerts: []string{testCA(t, "a")}}))
	if !strings.Contains(fos.Ran(), "update-ca-certificates --fresh") {
		t.Fatalf("odd bundle: want update-ca-certificates, ran %s", fos.Ran())
	}
}

// interruptAfterSwap leaves the state of an update to the set pems cut off
// after the folder swap and before the bundle rewrite: the recorded set
// hash gone, the folder holding the new set, the bundle the old one.
func interruptAfterSwap(t *testing.T, s *CorpNet, pems ...string) {
	t.Helper()
	must(t, os.Remove(s.Path(caHashFile)))
	must(t, os.RemoveAll(s.Path(guestCADir)))
	if len(pems) > 0 {
		must(t, os.MkdirAll(s.Path(guestCADir), 0o755))
	}
	for i, p := range pems {
		must(t, os.WriteFile(filepath.Join(s.Path(guestCADir), fmt.Sprintf("%016d.crt", i)), []byte(p), 0o644))
	}
}

// A CA removed on the host leaves the guest's bundle even when the last
// update was cut off after the folder swap, to an empty set or not.
func TestTrustStoreInterruptedUpdateStillDropsTheOldCA(t *testing.T) {
	ctx := context.Background()
	for _, next := range []string{"", "b"} {
		sys := testCA(t, "sys")
		s, fos := trustStoreServer(t, sys)
		a := testCA(t, "a")
		must(t, s.Apply(ctx, agent.Setup{CACerts: []string{a}}))
		var set []string
		want := "sys"
		if next != "" {
			set = []string{testCA(t, next)}
			want += "," + next
		}
		interruptAfterSwap(t, s, set...)
		must(t, s.Apply(ctx, agent.Setup{CACerts: set}))
		if got := strings.Join(bundleNames(t, s), ","); got != want {
			t.Errorf("new set %q after an update cut off: bundle %s, want %s", next, got, want)
		}
		if hashLinked(t, s, a) {
			t.Errorf("new set %q: a's hash link is left", next)
		}
		if strings.Contains(fos.Ran(), "update-ca-certificates") {
			t.Errorf("new set %q: the record says what the bundle holds; ran %s", next, fos.Ran())
		}
	}
}

// freshScript does what update-ca-certificates --fresh does to a plain
// store (a bundle of the system's CAs and the local ones, a link per
// local one, the hash links), and records the command in the fake.
type freshScript struct {
	realOpenSSL
	s      *CorpNet
	system string
}

func (f freshScript) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if name != "update-ca-certificates" {
		return f.realOpenSSL.Run(ctx, name, args...)
	}
	if out, err := f.FakeOS.Run(ctx, name, args...); err != nil {
		return out, err
	}
	links, _ := filepath.Glob(filepath.Join(f.s.Path(etcCertsDir), "*.pem"))
	for _, l := range links {
		if err := os.Remove(l); err != nil {
			return nil, err
		}
	}
	bundle := f.system
	local, _ := f.s.readCADir()
	for _, n := range sortedKeys(local) {
		bundle += string(local[n])
		if err := os.Symlink(filepath.Join(f.s.Path(guestCADir), n), f.s.Path(certLink(n))); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(f.s.Path(caBundle), []byte(bundle), 0o644); err != nil {
		return nil, err
	}
	return f.realOpenSSL.Run(ctx, "openssl", "rehash", f.s.Path(etcCertsDir))
}

// Without the record of what vmdock put in the bundle, or with a staging
// folder left over, the bundle's state is unknown: the script rebuilds it.
func TestTrustStoreUnknownStateIsRebuiltFresh(t *testing.T) {
	ctx := context.Background()
	for _, cut := range []string{"record", "staging"} {
		sys := testCA(t, "sys")
		s, fos := trustStoreServer(t, sys)
		s.OS = freshScript{realOpenSSL{fos}, s, sys}
		must(t, s.Apply(ctx, agent.Setup{CACerts: []string{testCA(t, "a")}}))
		if strings.Contains(fos.Ran(), "update-ca-certificates") {
			t.Fatalf("a normal update ran the script: %s", fos.Ran())
		}
		switch cut {
		case "record":
			must(t, os.Remove(s.Path(caBundleRecord)))
		case "staging":
			must(t, os.MkdirAll(s.Path(guestCADir+".new"), 0o755))
		}
		must(t, s.Apply(ctx, agent.Setup{CACerts: []string{testCA(t, "b")}}))
		if !strings.Contains(fos.Ran(), "update-ca-certificates --fresh") {
			t.Errorf("%s missing or left: want update-ca-certificates --fresh, ran %s", cut, fos.Ran())
		}
		if got := strings.Join(bundleNames(t, s), ","); got != "sys,b" {
			t.Errorf("%s: bundle after the rebuild: %s, want sys,b", cut, got)
		}
		// the record is back: the next update is an edit again
		before := fos.Ran()
		must(t, s.Apply(ctx, agent.Setup{CACerts: []string{testCA(t, "c")}}))
		if strings.Contains(strings.TrimPrefix(fos.Ran(), before), "update-ca-certificates") {
			t.Errorf("%s: the update after a rebuild ran the script again: %s", cut, strings.TrimPrefix(fos.Ran(), before))
		}
		if got := strings.Join(bundleNames(t, s), ","); got != "sys,c" {
			t.Errorf("%s: bundle after the edit: %s, want sys,c", cut, got)
		}
	}
}

// An update cut off during the bundle edit itself, to an empty set: no
// set hash, no folder, no staging folder are left to tell that vmdock CAs
// may still be in the bundle; the record, marked before the edit, does.
func TestTrustStoreCutDuringTheBundleEditIsRebuiltFresh(t *testing.T) {
	ctx := context.Background()
	sys := testCA(t, "sys")
	s, fos := trustStoreServer(t, sys)
	s.OS = freshScript{realOpenSSL{fos}, s, sys}
	must(t, s.Apply(ctx, agent.Setup{CACerts: []string{testCA(t, "a")}}))
	interruptAfterSwap(t, s)
	must(t, s.markBundleRecordUnknown())
	must(t, s.Apply(ctx, agent.Setup{}))
	if !strings.Contains(fos.Ran(), "update-ca-certificates --fresh") {
		t.Errorf("want update-ca-certificates --fresh, ran %s", fos.Ran())
	}
	if got := strings.Join(bundleNames(t, s), ","); got != "sys" {
		t.Errorf("bundle %s, want sys", got)
	}
}
