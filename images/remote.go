package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// manifestTimeout bounds the release manifest request, so a start on a
// dead network falls back to the copy fetched earlier without a long wait.
const manifestTimeout = 20 * time.Second

// effectiveBaseURL is the image base URL in force: the environment, then
// the config's imageBaseURL, then the build's default. It always ends in "/".
func effectiveBaseURL(configured string) string {
	base := os.Getenv(BaseURLEnv)
	if base == "" {
		base = configured
	}
	if base == "" {
		base = BaseURL
	}
	if base != "" && !strings.HasSuffix(base, "/") {
		base += "/"
	}
	return base
}

// EffectiveBaseURL is the image base URL a start would use with the
// config's imageBaseURL (which may be ""), and where that value came from.
func EffectiveBaseURL(configured string) (base, from string) {
	switch {
	case os.Getenv(BaseURLEnv) != "":
		from = BaseURLEnv
	case configured != "":
		from = "imageBaseURL"
	case BaseURL != "":
		from = "build default"
	}
	return effectiveBaseURL(configured), from
}

// CheckBaseURL accepts https:// URLs, and http:// only on a loopback
// address (tests, a local mirror): an image fetched over plain HTTP across
// a network could be swapped along with its manifest.
func CheckBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("image base URL %q: not an absolute URL (accepted: https://host/path/, or http:// on a loopback address)", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("image base URL %q: http:// only on a loopback address (accepted: https://, or http://127.0.0.1, [::1] or localhost)", s)
	}
	return fmt.Errorf("image base URL %q: scheme %q not supported (accepted: https://, or http:// on a loopback address)", s, u.Scheme)
}

// checkPlainHTTP refuses a plain http:// source on a host other than
// loopback unless a digest checks what arrives: across a network, the
// bytes could be swapped on the way.
func checkPlainHTTP(src source) error {
	u, err := url.Parse(src.URL)
	if src.URL == "" || err != nil || u.Scheme != "http" || isLoopbackHost(u.Hostname()) || !src.Digest.IsZero() {
		return nil
	}
	return fmt.Errorf("image %q: plain http:// to a host other than loopback needs a digest to check what arrives: `vmdock image import %s --digest sha256:<hex>` (accepted: https://, http:// on a loopback address, or an http:// import with --digest)", src.URL, src.URL)
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// releaseManifest fetches base's images.json and keeps a copy in the cache;
// when the network or the server fails, the copy fetched earlier is used,
// so a cached image starts offline. where names the manifest in errors.
// A pinned build (ManifestSHA256) accepts only the manifest of its release
// from its own BaseURL, fetched or saved.
func (c *Cache) releaseManifest(ctx context.Context, opts Options, base string) (*ReleaseManifest, string, error) {
	where := base + ReleaseManifestName
	if err := CheckBaseURL(base); err != nil {
		return nil, where, err
	}
	pin, err := manifestPin(opts.BaseURL)
	if err != nil {
		return nil, where, err
	}
	saved := c.savedManifestPath(base)
	if opts.Offline {
		// Asked not to fetch (status, image list, prune): reading the
		// copy is the normal path, not a fallback worth a log line.
		return readSavedManifest(saved, where, pin, fmt.Errorf("not fetched (offline)"))
	}
	b, err := fetchSmall(ctx, opts, where)
	if err != nil {
		m, w, rerr := readSavedManifest(saved, where, pin, err)
		if rerr == nil {
			slog.Info("using the image manifest fetched earlier", "url", where, "why", err.Error())
		}
		return m, w, rerr
	}
	if err := checkPin(b, pin, where); err != nil {
		return nil, where, err
	}
	m, err := ParseReleaseManifest(bytes.NewReader(b), where)
	if err != nil {
		return nil, where, err
	}
	if err := atomicfile.WriteFile(saved, b, 0o644); err != nil {
		slog.Warn("could not keep a copy of the image manifest", "file", saved, "err", err)
	}
	return m, where, nil
}

func readSavedManifest(saved, where, pin string, fetchErr error) (*ReleaseManifest, string, error) {
	b, err := os.ReadFile(saved)
	if err != nil {
		return nil, where, fmt.Errorf("image manifest %s: %w (and no copy was fetched before)", where, fetchErr)
	}
	copyOf := where + " (copy fetched earlier)"
	if err := checkPin(b, pin, copyOf); err != nil {
		return nil, where, err
	}
	m, err := ParseReleaseManifest(bytes.NewReader(b), copyOf)
	return m, where, err
}

// savedManifestPath keeps one manifest per base URL, so switching mirrors
// never mixes their files up.
func (c *Cache) savedManifestPath(base string) string {
	sum := sha256.Sum256([]byte(base))
	return filepath.Join(c.Dir, "manifests", hex.EncodeToString(sum[:8])+".json")
}

func fetchSmall(ctx context.Context, opts Options, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, manifestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := opts.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("server answered %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReleaseManifest+1))
	if err != nil {
		return nil, err
	}
	return b, nil
}
