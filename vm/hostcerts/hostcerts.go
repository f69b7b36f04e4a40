// Package hostcerts collects the CA certificates a guest should trust on
// top of its stock roots: those the host trusts beyond its own stock roots
// (a TLS-inspecting proxy's CA, a company CA) and PEM files a config names.
// The set is read and checked whole at start, so a bad file stops the start
// before anything in the guest changes.
package hostcerts

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/vmdock/vmdock/internal/fsutil"
)

// Cert is one CA certificate.
type Cert struct {
	// Source names where it came from (a file, a keychain), for messages.
	Source string
	// PEM is the certificate alone, PEM-encoded.
	PEM []byte
	// SHA256 is the hex digest of its DER bytes: the same certificate
	// from two sources counts once.
	SHA256 string
}

// Set is the certificates a guest trusts beyond its stock roots, ordered
// by digest so equal sets compare and hash equal.
type Set struct {
	Certs []Cert
}

// Hash identifies the set: it changes when a certificate is added or
// removed, and only then. The empty set has a hash too.
func (s Set) Hash() string {
	h := sha256.New()
	for _, c := range s.Certs {
		h.Write([]byte(c.SHA256 + "\n"))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// PEMs is each certificate's PEM text, for the guest.
func (s Set) PEMs() []string {
	out := make([]string, 0, len(s.Certs))
	for _, c := range s.Certs {
		out = append(out, string(c.PEM))
	}
	return out
}

// Parse reads every certificate in b. Anything but CERTIFICATE blocks
// that parse, or no block at all, is an error: a file that is half
// readable is not trusted in part.
func Parse(source string, b []byte) ([]Cert, error) {
	var out []Cert
	rest := b
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s: a PEM %q block; accepted: CERTIFICATE blocks only", source, blk.Type)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, fmt.Errorf("%s: certificate %d does not parse: %w", source, len(out)+1, err)
		}
		sum := sha256.Sum256(blk.Bytes)
		out = append(out, Cert{
			Source: source,
			PEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: blk.Bytes}),
			SHA256: hex.EncodeToString(sum[:]),
		})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate in it; accepted: a file of -----BEGIN CERTIFICATE----- blocks", source)
	}
	if len(bytes.TrimSpace(rest)) > 0 && bytes.Contains(rest, []byte("-----BEGIN")) {
		return nil, fmt.Errorf("%s: a damaged PEM block after certificate %d", source, len(out))
	}
	return out, nil
}

// maxFileBytes caps one certificate file: a real bundle is well under a
// MiB, and reading a mistaken path to a disk image must not take memory.
const maxFileBytes = 4 << 20

// ReadFile reads and checks one PEM file.
func ReadFile(path string) ([]Cert, error) {
	b, err := fsutil.ReadFileMax(path, maxFileBytes)
	var big *fsutil.TooLargeError
	switch {
	case errors.As(err, &big):
		return nil, fmt.Errorf("CA certificate file %s: larger than %d MiB; accepted: a PEM file of certificates", path, maxFileBytes>>20)
	case err != nil:
		return nil, fmt.Errorf("CA certificate file: %w", err)
	}
	certs, err := Parse(path, b)
	if err != nil {
		return nil, fmt.Errorf("CA certificate file %w", err)
	}
	return certs, nil
}

// Options say where the set comes from.
type Options struct {
	// Host adds the certificates the host trusts beyond its stock roots.
	Host bool
	// Files are PEM files, each of which must hold only certificates.
	Files []string
	// hostCerts replaces the platform's probe (tests).
	hostCerts func() ([]Cert, error)
}

// Collect reads the set. A bad file named in Files is the error; a host
// store that cannot be read is logged and left out, since the user did not
// name it and a guest without it still works for public registries.
func Collect(o Options) (Set, error) {
	var all []Cert
	for _, f := range o.Files {
		c, err := ReadFile(f)
		if err != nil {
			return Set{}, err
		}
		all = append(all, c...)
	}
	if o.Host {
		probe := o.hostCerts
		if probe == nil {
			probe = platformCerts
		}
		c, err := probe()
		if err != nil {
			slog.Warn("the host's CA certificates are left out", "err", err)
		}
		all = append(all, c...)
	}
	return newSet(all), nil
}

func newSet(all []Cert) Set {
	seen := map[string]bool{}
	var s Set
	for _, c := range all {
		if !seen[c.SHA256] {
			seen[c.SHA256] = true
			s.Certs = append(s.Certs, c)
		}
	}
	sort.Slice(s.Certs, func(i, j int) bool { return s.Certs[i].SHA256 < s.Certs[j].SHA256 })
	return s
}

// Describe is a one-line account of the set for status and logs.
func (s Set) Describe() string {
	if len(s.Certs) == 0 {
		return "none"
	}
	srcs := map[string]bool{}
	var names []string
	for _, c := range s.Certs {
		if !srcs[c.Source] {
			srcs[c.Source] = true
			names = append(names, c.Source)
		}
	}
	return fmt.Sprintf("%d (%s)", len(s.Certs), strings.Join(names, ", "))
}
