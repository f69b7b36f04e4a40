package images

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
)

// Digest names file content: "sha256:<hex>" or "sha512:<hex>".
type Digest struct {
	Algo string // sha256 | sha512
	Hex  string // lower case
}

func (d Digest) String() string {
	if d.IsZero() {
		return ""
	}
	return d.Algo + ":" + d.Hex
}

// IsZero reports an unknown digest.
func (d Digest) IsZero() bool { return d.Hex == "" }

// key is the digest as a file name (no colon, which some file systems dislike).
func (d Digest) key() string { return d.Algo + "-" + d.Hex }

// ParseDigest accepts "sha256:<64 hex>" or "sha512:<128 hex>".
func ParseDigest(s string) (Digest, error) {
	algo, hexPart, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Digest{}, fmt.Errorf("digest %q: want sha256:<hex> or sha512:<hex>", s)
	}
	d := Digest{Algo: strings.ToLower(algo), Hex: strings.ToLower(hexPart)}
	if err := d.validate(); err != nil {
		return Digest{}, fmt.Errorf("digest %q: %w", s, err)
	}
	return d, nil
}

func (d Digest) validate() error {
	var want int
	switch d.Algo {
	case "sha256":
		want = sha256.Size * 2
	case "sha512":
		want = sha512.Size * 2
	default:
		return fmt.Errorf("algorithm %q not supported (sha256, sha512)", d.Algo)
	}
	if len(d.Hex) != want {
		return fmt.Errorf("want %d hex digits for %s, got %d", want, d.Algo, len(d.Hex))
	}
	if _, err := hex.DecodeString(d.Hex); err != nil {
		return fmt.Errorf("not hex: %w", err)
	}
	return nil
}

// newHash returns the hash for d's algorithm; sha256 for an unknown digest.
func (d Digest) newHash() hash.Hash {
	if d.Algo == "sha512" {
		return sha512.New()
	}
	return sha256.New()
}

func digestOf(algo string, h hash.Hash) Digest {
	return Digest{Algo: algo, Hex: hex.EncodeToString(h.Sum(nil))}
}

// hashFile computes the digest of path with the given algorithm.
func hashFile(path, algo string) (Digest, error) {
	f, err := os.Open(path)
	if err != nil {
		return Digest{}, err
	}
	defer f.Close()
	h := Digest{Algo: algo}.newHash()
	if _, err := io.Copy(h, f); err != nil {
		return Digest{}, fmt.Errorf("hash %s: %w", path, err)
	}
	return digestOf(algo, h), nil
}

// algoOf is the algorithm to use for a file whose digest may be unknown.
func algoOf(d Digest) string {
	if d.Algo == "" {
		return "sha256"
	}
	return d.Algo
}
