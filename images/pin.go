package images

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// PinnedManifest is ManifestSHA256 as "sha256:<hex>", or "" when this
// build is not pinned. A malformed value set at build time is an error, so
// a bad release build cannot silently run unpinned.
func PinnedManifest() (string, error) {
	pin := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(ManifestSHA256)), "sha256:")
	if pin == "" {
		return "", nil
	}
	if _, err := ParseDigest("sha256:" + pin); err != nil {
		return "", fmt.Errorf("this build's pinned image manifest %q: %w (rebuild with IMAGE_MANIFEST_SHA256 set to 64 hex digits, or empty)", ManifestSHA256, err)
	}
	return "sha256:" + pin, nil
}

// manifestPin is the digest images.json must have when a start resolves
// images with the config's imageBaseURL configured: the build's pin when
// the images come from the build's own BaseURL, else "" (an override the
// user chose is trusted as it is).
func manifestPin(configured string) (string, error) {
	if os.Getenv(BaseURLEnv) != "" || configured != "" || BaseURL == "" {
		return "", nil
	}
	return PinnedManifest()
}

// checkPin refuses manifest bytes whose digest is not pin ("" accepts any).
func checkPin(b []byte, pin, where string) error {
	if pin == "" {
		return nil
	}
	sum := sha256.Sum256(b)
	got := "sha256:" + hex.EncodeToString(sum[:])
	if got != pin {
		return fmt.Errorf("image manifest %s: digest %s, but this vmdock build is pinned to %s (the manifest of its release); "+
			"use the vmdock release that matches these images, or set %s to use them anyway", where, got, pin, BaseURLEnv)
	}
	return nil
}
