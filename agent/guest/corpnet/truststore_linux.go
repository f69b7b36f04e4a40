package corpnet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmdock/vmdock/agent/guest/guestos"
)

// Debian's trust store, which the vmdock CAs in guestCADir join. Debian's
// update-ca-certificates builds it from every certificate it knows, with
// two processes per certificate (about 150): over a minute of a first boot
// under TCG, two with an fstrim beside it. The agent writes what that
// script writes for a change of the local certificates (a link per
// certificate, the bundle, openssl's hash links), in one process.
const (
	etcCertsDir = "/etc/ssl/certs"
	caBundle    = "/etc/ssl/certs/ca-certificates.crt"
	// Hooks (Java's keystore, for one) must see every change: where there
	// are any, update-ca-certificates runs them.
	caHooksDir = "/etc/ca-certificates/update.d"
	// caBundleRecord lists the certificates vmdock added to the bundle
	// (file name and DER digest, a line each). Before the bundle is
	// edited it is replaced by recordUnknown, and written again after, so
	// a list in it always says what the bundle holds.
	caBundleRecord = "/var/lib/vmdock/ca-bundle-vmdock.list"
	recordUnknown  = "unknown: an edit of the bundle did not finish\n"
)

// errRecordUnknown: the record says an edit of the bundle was cut off.
var errRecordUnknown = errors.New("an edit of the trust store bundle did not finish")

// errNotPlainStore says the guest's trust store is not the one
// updateTrustStore knows how to edit.
var errNotPlainStore = errors.New("not a plain Debian trust store")

// rebuildTrustStore makes the trust store hold the certificates now in
// guestCADir, where before are the ones vmdock had added (file name to
// DER digest; nil: not known). Where the store is not the plain Debian
// one, or before is not known, it runs update-ca-certificates --fresh,
// which drops the links of those gone. The record of the added ones is
// rewritten after.
func (s *CorpNet) rebuildTrustStore(ctx context.Context, before map[string]string, now map[string][]byte) error {
	if err := s.markBundleRecordUnknown(); err != nil {
		return err
	}
	err := errors.New("what vmdock added to the bundle is not known")
	if before != nil {
		err = s.updateTrustStore(ctx, before, now)
	}
	if err != nil {
		s.Logger().Info("trust store: update-ca-certificates rebuilds it", "why", err)
		if _, err := s.OS.Run(ctx, "update-ca-certificates", "--fresh"); err != nil {
			return err
		}
	}
	return s.writeBundleRecord(now)
}

func (s *CorpNet) updateTrustStore(ctx context.Context, before map[string]string, now map[string][]byte) error {
	if hooks, _ := os.ReadDir(s.Path(caHooksDir)); len(hooks) > 0 {
		return fmt.Errorf("%w: %s has hooks", errNotPlainStore, caHooksDir)
	}
	bundle, err := os.ReadFile(s.Path(caBundle))
	if err != nil {
		return fmt.Errorf("%w: %v", errNotPlainStore, err)
	}
	blocks, err := pemBlocks(bundle)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errNotPlainStore, caBundle, err)
	}
	// The ones added before are at the end of the bundle; only the last
	// copy of each goes, so a system CA the host also sent stays.
	for _, d := range before {
		digest, err := hex.DecodeString(d)
		if err != nil || len(digest) != sha256.Size {
			return fmt.Errorf("%s: digest %q", caBundleRecord, d)
		}
		blocks = dropLast(blocks, [sha256.Size]byte(digest))
	}
	var out bytes.Buffer
	for _, b := range blocks {
		out.Write(b.raw)
	}
	for _, name := range sortedKeys(now) {
		out.Write(now[name])
	}
	if err := guestos.WriteFile(s.Path(caBundle), out.Bytes(), 0o644); err != nil {
		return err
	}
	// update-ca-certificates names a certificate's link after its file.
	for name := range before {
		if _, ok := now[name]; !ok {
			if err := os.Remove(s.Path(certLink(name))); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	for _, name := range sortedKeys(now) {
		link := s.Path(certLink(name))
		if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		// Relative, so the link reads the same from any root.
		target, _ := filepath.Rel(etcCertsDir, filepath.Join(guestCADir, name))
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	// The subject-hash links OpenSSL looks certificates up by; rehash also
	// drops the ones whose certificate went.
	if _, err := s.OS.Run(ctx, "openssl", "rehash", s.Path(etcCertsDir)); err != nil {
		return fmt.Errorf("openssl rehash %s: %w", etcCertsDir, err)
	}
	return nil
}

// certLink is the link update-ca-certificates makes for a local
// certificate file.
func certLink(name string) string {
	return filepath.Join(etcCertsDir, strings.TrimSuffix(name, ".crt")+".pem")
}

// bundleBlock is one certificate of a bundle: its bytes as the file has
// them (with any text before it), so what stays is written back unchanged.
type bundleBlock struct {
	raw    []byte
	digest [sha256.Size]byte
}

// pemBlocks splits a bundle into its certificates; anything else in it
// means the file is not what update-ca-certificates writes.
func pemBlocks(b []byte) ([]bundleBlock, error) {
	var blocks []bundleBlock
	for {
		blk, rest := pem.Decode(b)
		if blk == nil {
			if len(bytes.TrimSpace(b)) > 0 {
				return nil, errors.New("text after the last certificate")
			}
			return blocks, nil
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a %s block", blk.Type)
		}
		blocks = append(blocks, bundleBlock{raw: b[:len(b)-len(rest)], digest: sha256.Sum256(blk.Bytes)})
		b = rest
	}
}

func derDigest(p []byte) [sha256.Size]byte {
	blk, _ := pem.Decode(p)
	if blk == nil {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(blk.Bytes)
}

func dropLast(blocks []bundleBlock, digest [sha256.Size]byte) []bundleBlock {
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i].digest == digest {
			return append(blocks[:i:i], blocks[i+1:]...)
		}
	}
	return blocks
}

// readBundleRecord is what vmdock added to the bundle, file name to DER
// digest; an error wrapping fs.ErrNotExist when there is no record, and
// errRecordUnknown when an edit was cut off.
func (s *CorpNet) readBundleRecord() (map[string]string, error) {
	b, err := os.ReadFile(s.Path(caBundleRecord))
	if err != nil {
		return nil, err
	}
	if string(b) == recordUnknown {
		return nil, errRecordUnknown
	}
	rec := map[string]string{}
	for line := range strings.Lines(string(b)) {
		name, digest, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			return nil, fmt.Errorf("%s: line %q is not a file name and a digest", caBundleRecord, line)
		}
		rec[name] = digest
	}
	return rec, nil
}

// markBundleRecordUnknown says, until writeBundleRecord, that what vmdock
// added to the bundle is not known.
func (s *CorpNet) markBundleRecordUnknown() error {
	if err := os.MkdirAll(filepath.Dir(s.Path(caBundleRecord)), 0o755); err != nil {
		return err
	}
	return guestos.WriteFile(s.Path(caBundleRecord), []byte(recordUnknown), 0o644)
}

// writeBundleRecord records now as what vmdock added to the bundle.
func (s *CorpNet) writeBundleRecord(now map[string][]byte) error {
	var b strings.Builder
	for _, name := range sortedKeys(now) {
		d := derDigest(now[name])
		fmt.Fprintf(&b, "%s %s\n", name, hex.EncodeToString(d[:]))
	}
	if err := os.MkdirAll(filepath.Dir(s.Path(caBundleRecord)), 0o755); err != nil {
		return err
	}
	return guestos.WriteFile(s.Path(caBundleRecord), []byte(b.String()), 0o644)
}

// readCADir is the certificates in the vmdock folder, file name to PEM.
func (s *CorpNet) readCADir() (map[string][]byte, error) {
	entries, err := os.ReadDir(s.Path(guestCADir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".crt") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.Path(guestCADir), e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = b
	}
	return files, nil
}
