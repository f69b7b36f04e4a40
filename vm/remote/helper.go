package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Facts are what one probe of the server finds.
type Facts struct {
	Arch string // amd64 or arm64
}

// probeScript prints uname -m and the socket's state (ok, missing,
// denied); $1 is the socket.
const probeScript = `uname -m
if [ ! -S "$1" ]; then echo missing; elif [ -r "$1" ] && [ -w "$1" ]; then echo ok; else echo denied; fi`

// HelperPath is where the helper of this hash lives on the server, under
// the home folder: a new vmdock brings a new file beside the old one.
func HelperPath(sha string) string { return ".cache/vmdock/vmdock-agent-" + sha[:16] }

// Probe checks the server once: reachable, its arch supported, Docker's
// socket there and usable by the SSH user.
func (s Server) Probe(ctx context.Context) (Facts, error) {
	out, err := s.run(ctx, nil, probeScript, s.Socket)
	if err != nil {
		return Facts{}, err
	}
	lines := strings.Fields(string(out))
	if len(lines) != 2 {
		return Facts{}, fmt.Errorf("%s: the probe's answer %q is not uname -m and the socket's state; is the login shell POSIX?", s.Target, string(out))
	}
	arch, err := GoArch(lines[0])
	if err != nil {
		return Facts{}, fmt.Errorf("%s: %w", s.Target, err)
	}
	switch lines[1] {
	case "missing":
		return Facts{}, fmt.Errorf("%s: no Docker engine: %s is not a socket; install Docker there, or set remote.socket to a rootless engine's socket", s.Target, s.Socket)
	case "denied":
		return Facts{}, fmt.Errorf("%s: the SSH user may not use %s; add it to the docker group (`sudo usermod -aG docker USER`, then log in again)", s.Target, s.Socket)
	}
	return Facts{Arch: arch}, nil
}

// GoArch maps uname -m to the helper's arch.
func GoArch(machine string) (string, error) {
	switch machine {
	case "x86_64", "amd64":
		return "amd64", nil
	case "aarch64", "arm64":
		return "arm64", nil
	}
	return "", fmt.Errorf("the server's arch %q is not supported; accepted: x86_64 or aarch64 Linux", machine)
}

// installScript writes stdin to the helper's file, checks its hash and
// only then puts it in place; $1 is the path under the home folder, $2 the
// hash.
const installScript = `set -e
f="$HOME/$1"
mkdir -p "$(dirname "$f")"
cat > "$f.tmp"
echo "$2  $f.tmp" | sha256sum -c --status -
chmod 700 "$f.tmp"
mv -f "$f.tmp" "$f"`

// Install copies bin (the helper for the server's arch) to the server.
func (s Server) Install(ctx context.Context, bin []byte) error {
	sha := SHA256(bin)
	if _, err := s.run(ctx, bytes.NewReader(bin), installScript, HelperPath(sha), sha); err != nil {
		return fmt.Errorf("install vmdock's helper on the server: %w", err)
	}
	return nil
}

// SHA256 is bin's hash in hex.
func SHA256(bin []byte) string {
	h := sha256.Sum256(bin)
	return hex.EncodeToString(h[:])
}

// helperScript starts the helper after checking its hash again (a file
// changed on the server is not run); $1 its path, $2 the hash, the rest
// its arguments.
const helperScript = `f="$HOME/$1"; sum="$2"; shift 2
echo "$sum  $f" | sha256sum -c --status - 2>/dev/null || exit ` + helperMissingExit + `
exec "$f" remote "$@"`

// helperMissingExit is helperScript's exit code for a helper that is not
// there or not the one of this hash.
const helperMissingExit = "97"

// ErrHelperMissing: the server has no helper of the hash asked for; it
// is installed, then the session dialled again.
var ErrHelperMissing = errors.New("vmdock's helper is not installed on the server")

// removeScript deletes every vmdock helper in the server's cache (another
// instance's next session installs its own again) and the sync state of
// the instance $1 names, if any; the folders it synced stay, they are the
// user's files on the server.
const removeScript = `rm -f "$HOME"/.cache/vmdock/vmdock-agent-*
if [ -n "$1" ]; then rm -rf "$HOME/.cache/vmdock/sync/$1"; fi
rmdir "$HOME/.cache/vmdock/sync" 2>/dev/null
rmdir "$HOME/.cache/vmdock" 2>/dev/null
true`

// syncKeyPattern is an instance's name on the server (the helper's
// --sync-key): a plain folder name.
var syncKeyPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,99}$`)

// RemoveHelpers takes vmdock's helpers and the sync state of the instance
// syncKey names ("": none) off the server; its images, containers,
// volumes and the synced folders stay.
func (s Server) RemoveHelpers(ctx context.Context, syncKey string) error {
	if syncKey != "" && !syncKeyPattern.MatchString(syncKey) {
		return fmt.Errorf("the instance's name on the server %q is not accepted; accepted: %s", syncKey, syncKeyPattern)
	}
	if _, err := s.run(ctx, nil, removeScript, syncKey); err != nil {
		return fmt.Errorf("remove vmdock's helper from the server: %w", err)
	}
	return nil
}
