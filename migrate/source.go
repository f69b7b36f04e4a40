package migrate

import (
	"fmt"
	"path/filepath"
	"strings"
)

// ResolveSource turns --from (a docker context name or unix://PATH) into
// the source engine's socket path. endpoint reads a context's docker
// host; ownContext and ownSocket are the target instance's, which cannot
// be its own source.
func ResolveSource(from string, endpoint func(name string) (string, error), ownContext, ownSocket string) (string, error) {
	if from == "" {
		return "", fmt.Errorf("--from is required: a docker context name (docker context ls) or unix://PATH")
	}
	if from == ownContext {
		return "", fmt.Errorf("--from %s is this instance's own docker context: name the engine to move from", from)
	}
	host := from
	if !strings.Contains(from, "://") {
		h, err := endpoint(from)
		if err != nil {
			return "", err
		}
		host = h
	}
	scheme, path, _ := strings.Cut(host, "://")
	if scheme != "unix" {
		return "", fmt.Errorf("--from %s: %s:// engines are not supported yet; migrate reads an engine on a unix socket (unix://PATH)", from, scheme)
	}
	if path == "" || !filepath.IsAbs(path) {
		return "", fmt.Errorf("--from %s: want an absolute socket path after unix://", from)
	}
	if sameFile(path, ownSocket) {
		return "", fmt.Errorf("--from %s is this instance's own docker socket: name the engine to move from", from)
	}
	return path, nil
}

// sameFile reports whether a and b are one path once links are followed
// (/var/run/docker.sock may link to an instance's socket).
func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}

// CheckTarget refuses a target instance migrate cannot fill: one that is
// not running, or one that runs containerd instead of docker.
func CheckTarget(profile, runtime string, running bool) error {
	if runtime != "docker" {
		return fmt.Errorf("profile %q runs the %s runtime: migrate fills a docker instance (vmdock start -p NAME --runtime docker)", profile, runtime)
	}
	if !running {
		return fmt.Errorf("profile %q is not running: start it with `vmdock start -p %s`", profile, profile)
	}
	return nil
}
