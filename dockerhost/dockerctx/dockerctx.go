// Package dockerctx manages vmdock's docker CLI context by writing the
// docker CLI's own on-disk store (no docker CLI, no docker module): one
// meta.json per context under <config>/contexts/meta/<sha256(name)>/, and
// the current context in <config>/config.json.
package dockerctx

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// DefaultName is the docker CLI's built-in context; it has no files.
const DefaultName = "default"

// Name is the context name for a vmdock profile.
func Name(profile string) string {
	if profile == "" || profile == "default" {
		return "vmdock"
	}
	return "vmdock-" + profile
}

// validName is the docker CLI's rule for context names.
var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.+-]+$`)

// Store is one docker config folder ($DOCKER_CONFIG or ~/.docker).
type Store struct {
	Dir string
}

// Default is the store the docker CLI uses: $DOCKER_CONFIG, else ~/.docker.
func Default() (Store, error) {
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		return Store{Dir: d}, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return Store{}, fmt.Errorf("locate the docker config folder: %w", err)
	}
	return Store{Dir: filepath.Join(home, ".docker")}, nil
}

func contextID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

func (s Store) metaDir(name string) string {
	return filepath.Join(s.Dir, "contexts", "meta", contextID(name))
}
func (s Store) tlsDir(name string) string {
	return filepath.Join(s.Dir, "contexts", "tls", contextID(name))
}
func (s Store) configPath() string { return filepath.Join(s.Dir, "config.json") }

func checkName(name string) error {
	if name == DefaultName {
		return fmt.Errorf("context name %q is reserved by the docker CLI", name)
	}
	if !validName.MatchString(name) {
		return fmt.Errorf("bad docker context name %q: want letters, digits and _.+- (starting with a letter or digit, 2+ characters)", name)
	}
	return nil
}

// Exists reports whether the context exists; "default" always does.
func (s Store) Exists(name string) bool {
	if name == DefaultName {
		return true
	}
	fi, err := os.Stat(filepath.Join(s.metaDir(name), "meta.json"))
	return err == nil && fi.Mode().IsRegular()
}

// Ensure creates the context, or updates its docker endpoint and
// description. Fields vmdock does not own (other endpoints, extra
// metadata added by `docker context update`) are kept.
func (s Store) Ensure(name, host, description string) error {
	if err := checkName(name); err != nil {
		return err
	}
	dir := s.metaDir(name)
	path := filepath.Join(dir, "meta.json")
	meta := map[string]json.RawMessage{}
	old, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(old, &meta); err != nil {
			return fmt.Errorf("read docker context %s (%s): %w", name, path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read docker context %s: %w", name, err)
	}

	md := map[string]json.RawMessage{}
	if raw, ok := meta["Metadata"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &md); err != nil {
			return fmt.Errorf("read docker context %s metadata: %w", name, err)
		}
	}
	if description == "" {
		delete(md, "Description")
	} else {
		md["Description"] = mustJSON(description)
	}
	eps := map[string]json.RawMessage{}
	if raw, ok := meta["Endpoints"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &eps); err != nil {
			return fmt.Errorf("read docker context %s endpoints: %w", name, err)
		}
	}
	eps["docker"] = mustJSON(struct {
		Host          string `json:"Host,omitempty"`
		SkipTLSVerify bool
	}{host, false})
	meta["Name"] = mustJSON(name)
	meta["Metadata"] = mustJSON(md)
	meta["Endpoints"] = mustJSON(eps)

	data, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("encode docker context %s: %w", name, err)
	}
	if bytes.Equal(data, old) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create docker context %s: %w", name, err)
	}
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write docker context %s: %w", name, err)
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with plain strings, maps and structs
	}
	return b
}

// Remove deletes the context's metadata and TLS folders. When it is the
// current context the docker CLI is switched back to "default" first, so
// docker never points at a context that no longer exists.
func (s Store) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if s.Current() == name {
		if err := s.Use(DefaultName); err != nil {
			return err
		}
	}
	for _, d := range []string{s.metaDir(name), s.tlsDir(name)} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("remove docker context %s: %w", name, err)
		}
	}
	return nil
}

// Current is the context config.json selects; "default" when none is set
// or the file cannot be read.
func (s Store) Current() string {
	cfg, err := readConfig(s.configPath())
	if err != nil {
		return DefaultName
	}
	raw, ok := cfg.get("currentContext")
	if !ok {
		return DefaultName
	}
	var name string
	if json.Unmarshal(raw, &name) != nil || name == "" {
		return DefaultName
	}
	return name
}

// Use makes name the current context. Only the currentContext key of
// config.json changes; every other key keeps its value and order, and the
// file keeps its mode.
func (s Store) Use(name string) error {
	if name != DefaultName {
		if err := checkName(name); err != nil {
			return err
		}
		if !s.Exists(name) {
			return fmt.Errorf("docker context %q does not exist in %s", name, s.Dir)
		}
	}
	path := s.configPath()
	// Write through a symlinked config.json (dotfile managers) instead of
	// replacing the link, as the docker CLI does.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	cfg, err := readConfig(path)
	if err != nil {
		return err
	}
	if name == DefaultName {
		// The docker CLI stores "default" as an absent key.
		if !cfg.delete("currentContext") {
			return nil
		}
	} else {
		if raw, ok := cfg.get("currentContext"); ok && bytes.Equal(raw, mustJSON(name)) {
			return nil
		}
		cfg.set("currentContext", mustJSON(name))
	}
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	data, err := cfg.encode()
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("switch docker context to %s: %w", name, err)
	}
	return nil
}

// Activate makes name current and returns the context to restore later.
// When name was already current (say, after a crash) the previous one is
// unknown and "default" is returned.
func (s Store) Activate(name string) (previous string, err error) {
	previous = s.Current()
	if previous == name {
		previous = DefaultName
	}
	if err := s.Use(name); err != nil {
		return "", err
	}
	return previous, nil
}

// Restore switches back to previous (or "default" when previous is gone),
// but only while ours is still current: a user who switched contexts by
// hand in the meantime keeps their choice.
func (s Store) Restore(previous, ours string) error {
	if s.Current() != ours {
		return nil
	}
	if previous == "" || previous == ours || !s.Exists(previous) {
		previous = DefaultName
	}
	return s.Use(previous)
}

// Endpoint is the docker host of context name as its meta.json says
// (unix://..., tcp://..., ssh://...); for "default", $DOCKER_HOST or the
// docker CLI's default socket.
func (s Store) Endpoint(name string) (string, error) {
	if name == DefaultName {
		if h := os.Getenv("DOCKER_HOST"); h != "" {
			return h, nil
		}
		return "unix:///var/run/docker.sock", nil
	}
	b, err := os.ReadFile(filepath.Join(s.metaDir(name), "meta.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("docker context %q does not exist: pick one of `docker context ls`", name)
	}
	if err != nil {
		return "", fmt.Errorf("read docker context %s: %w", name, err)
	}
	var meta struct {
		Endpoints map[string]struct{ Host string }
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return "", fmt.Errorf("read docker context %s: %w", name, err)
	}
	host := meta.Endpoints["docker"].Host
	if host == "" {
		return "", fmt.Errorf("docker context %q has no docker endpoint", name)
	}
	return host, nil
}
