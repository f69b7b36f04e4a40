package syncmount

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/mutagen-io/mutagen/pkg/synchronization"
	"github.com/mutagen-io/mutagen/pkg/synchronization/compression"
	"github.com/mutagen-io/mutagen/pkg/synchronization/core"
	ignoremutagen "github.com/mutagen-io/mutagen/pkg/synchronization/core/ignore/mutagen"
	urlpkg "github.com/mutagen-io/mutagen/pkg/url"
)

// Default modes for synced files and folders. Mutagen's own defaults
// (0600/0700) would hide project files from other users in the guest, such as
// a container's www-data.
const (
	DefaultFileMode fs.FileMode = 0o644
	DefaultDirMode  fs.FileMode = 0o755
)

// Mount describes one sync mount.
type Mount struct {
	// ID names the mount's session; stable across restarts. Lower-case
	// letters, digits and '-', at most 40 characters, starting with a letter
	// or digit (a hash of the host path works).
	ID string
	// HostPath is the folder on the host (alpha). It must exist.
	HostPath string
	// GuestPath is the guest copy, e.g. /var/lib/vmdock/sync/<id> (beta).
	// Its parent must exist in the guest.
	GuestPath string
	// Ignores are Mutagen ignore patterns (gitignore-like; a leading '/'
	// anchors at the mount root, see AnchoredIgnores). Ignored paths are not
	// synced: they stay wherever they were written.
	Ignores []string
	// UID and GID own the files Mutagen writes in the guest copy. Negative
	// means the guest agent's own user.
	UID, GID int
	// FileMode and DirMode are the permission bits of new files and folders
	// on both sides; zero means DefaultFileMode/DefaultDirMode. The
	// executable bit of files is carried over separately.
	FileMode, DirMode fs.FileMode
	// HostToGuest makes the session one-way (Mutagen's one-way-safe): the
	// host's changes reach the guest copy, the guest's stay in it and
	// never reach the host (a sandbox's workspace, whose edits the user
	// reviews first).
	HostToGuest bool
}

// IDPattern is what a sync mount's id looks like, on both sides of the
// session (the guest agent and a remote server's helper check it too).
var IDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)

func (m Mount) validate() error {
	if !IDPattern.MatchString(m.ID) {
		return fmt.Errorf("sync mount id %q: want [a-z0-9][a-z0-9-]{0,39}", m.ID)
	}
	if !filepath.IsAbs(m.HostPath) {
		return fmt.Errorf("sync mount %s: host path %q is not absolute", m.ID, m.HostPath)
	}
	if !path.IsAbs(m.GuestPath) || path.Clean(m.GuestPath) == "/" {
		return fmt.Errorf("sync mount %s: guest path %q must be an absolute sub folder", m.ID, m.GuestPath)
	}
	if m.FileMode&^fs.ModePerm != 0 || m.FileMode&0o111 != 0 {
		return fmt.Errorf("sync mount %s: file mode %v: only rw permission bits", m.ID, m.FileMode)
	}
	if m.DirMode&^fs.ModePerm != 0 {
		return fmt.Errorf("sync mount %s: dir mode %v: only permission bits", m.ID, m.DirMode)
	}
	return checkHostDir(m.HostPath)
}

// checkHostDir refuses a missing host folder: Mutagen would treat it as a
// deleted root and halt the session.
func checkHostDir(dir string) error {
	return checkDir("sync host folder", dir)
}

func checkDir(what, dir string) error {
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("%s %s: not a directory", what, dir)
	}
	return nil
}

// AnchoredIgnores turns mount-relative exclude paths ("node_modules",
// "web/vendor") into Mutagen patterns that match only at that path, not at
// every depth.
func AnchoredIgnores(excludes []string) []string {
	out := make([]string, 0, len(excludes))
	for _, e := range excludes {
		e = strings.Trim(filepath.ToSlash(e), "/")
		if e != "" {
			out = append(out, "/"+e)
		}
	}
	return out
}

// sessionName is the Mutagen session name of a mount.
func sessionName(id string) string { return "vmdock-" + id }

// mountIDFromName reverses sessionName; ok is false for foreign sessions.
func mountIDFromName(name string) (string, bool) {
	return strings.CutPrefix(name, "vmdock-")
}

// Session labels. A label keeps the settings' fingerprint so that Ensure can
// tell when a mount changed and its session must be re-created.
const labelConfig = "vmdock-config"

// watchPlan is how each side's changes are found: by Mutagen's own watch
// (poll every pollSeconds on Linux, FSEvents on macOS), or by the caller's
// watcher through Flush.
type watchPlan struct {
	pollSeconds               uint32
	hostWatched, guestWatched bool
}

// manual: Mutagen watches neither side, so it syncs only when flushed
// (it then skips even the cycle it runs on connecting).
func (w watchPlan) manual() bool { return w.hostWatched && w.guestWatched }

func (w watchPlan) mode(watchedByCaller bool) synchronization.WatchMode {
	if watchedByCaller {
		return synchronization.WatchMode_WatchModeNoWatch
	}
	return synchronization.WatchMode_WatchModeDefault
}

// fingerprint hashes everything that is fixed at session creation.
func (m Mount) fingerprint(w watchPlan) string {
	h := sha256.New()
	for _, s := range []string{
		m.HostPath, m.GuestPath, strings.Join(m.Ignores, "\x00"),
		strconv.Itoa(m.UID), strconv.Itoa(m.GID),
		m.fileMode().String(), m.dirMode().String(),
		strconv.FormatUint(uint64(w.pollSeconds), 10),
		strconv.FormatBool(w.hostWatched), strconv.FormatBool(w.guestWatched),
	} {
		h.Write([]byte(s))
		h.Write([]byte{0xff})
	}
	if m.HostToGuest {
		// Only when set: the two-way sessions that exist keep their hash.
		h.Write([]byte("host-to-guest"))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func (m Mount) fileMode() fs.FileMode {
	if m.FileMode == 0 {
		return DefaultFileMode
	}
	return m.FileMode
}

func (m Mount) dirMode() fs.FileMode {
	if m.DirMode == 0 {
		return DefaultDirMode
	}
	return m.DirMode
}

func (m Mount) alphaURL() *urlpkg.URL {
	return &urlpkg.URL{Kind: urlpkg.Kind_Synchronization, Protocol: urlpkg.Protocol_Local, Path: m.HostPath}
}

func (m Mount) betaURL() *urlpkg.URL {
	return &urlpkg.URL{Kind: urlpkg.Kind_Synchronization, Protocol: guestProtocol, Host: guestHost, Path: m.GuestPath}
}

// configurations returns the session-wide, the host-only and the
// guest-only configuration.
func (m Mount) configurations(w watchPlan) (common, host, guest *synchronization.Configuration) {
	mode := core.SynchronizationMode_SynchronizationModeTwoWaySafe
	if m.HostToGuest {
		mode = core.SynchronizationMode_SynchronizationModeOneWaySafe
	}
	common = &synchronization.Configuration{
		SynchronizationMode:  mode,
		PermissionsMode:      core.PermissionsMode_PermissionsModePortable,
		DefaultFileMode:      uint32(m.fileMode()),
		DefaultDirectoryMode: uint32(m.dirMode()),
		Ignores:              m.Ignores,
		WatchPollingInterval: w.pollSeconds,
		// The stream is a local virtio/vsock link: deflate would only cost CPU.
		CompressionAlgorithm: compression.Algorithm_AlgorithmNone,
	}
	host = &synchronization.Configuration{WatchMode: w.mode(w.hostWatched)}
	guest = &synchronization.Configuration{WatchMode: w.mode(w.guestWatched)}
	if m.UID >= 0 {
		guest.DefaultOwner = "id:" + strconv.Itoa(m.UID)
	}
	if m.GID >= 0 {
		guest.DefaultGroup = "id:" + strconv.Itoa(m.GID)
	}
	return common, host, guest
}

// validateConfig runs Mutagen's own checks so that a bad mount fails in
// Ensure, not later when the session is loaded.
func validateConfig(common, host, guest *synchronization.Configuration) error {
	if err := common.EnsureValid(false); err != nil {
		return fmt.Errorf("sync configuration: %w", err)
	}
	if err := host.EnsureValid(true); err != nil {
		return fmt.Errorf("sync host configuration: %w", err)
	}
	if err := guest.EnsureValid(true); err != nil {
		return fmt.Errorf("sync guest configuration: %w", err)
	}
	for _, p := range common.Ignores {
		if err := ignoremutagen.EnsurePatternValid(p); err != nil {
			return fmt.Errorf("sync ignore %q: %w", p, err)
		}
	}
	return nil
}

var errUnknownMount = errors.New("no sync session for this mount")
