// Package mounts turns the user's folder-sharing requests (-V flags or the
// YAML mounts: list) into checked, absolute mount specs and the tagged
// shares (Share) a VM driver exports. It knows nothing about instances or
// drivers, so config, the drivers (driver.Spec.Shares), the host agent and
// the guest agent depend on it and not the other way round.
package mounts

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Mount is one host folder shared into the guest, from a -V flag or the
// YAML mounts: list. config.Mount is an alias of it, so both have one
// definition.
type Mount struct {
	Location  string `yaml:"location" json:"location"`
	GuestPath string `yaml:"mountPoint,omitempty" json:"mountPoint,omitempty"`
	Writable  bool   `yaml:"writable" json:"writable"`
	// Type overrides the instance's mountType for this folder (virtiofs or
	// 9p); empty uses the instance default.
	Type string `yaml:"type,omitempty" json:"type,omitempty"`
	// Exclude lists subfolders (relative to the mount) that live on the
	// guest's data disk instead of the share: dependency trees such as
	// node_modules or vendor get native speed there, and the host sees
	// only an empty folder where each is mounted.
	Exclude []string `yaml:"exclude,omitempty" json:"exclude,omitempty"`
	// Mode is how the folder reaches the guest: share (virtiofs or 9p,
	// the default) or sync (a copy on the guest's disk, kept in sync both
	// ways, at native speed).
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// Inotify passes host edits in a shared folder on as inotify events in
	// the guest, so watchers in containers (webpack, nodemon, Vite) see
	// them; virtiofs and 9p raise none. Default true on share mounts.
	Inotify *bool `yaml:"inotify,omitempty" json:"inotify,omitempty"`
	// Cache is the share's caching mode (see CacheModes); empty takes the
	// type's default, which keeps host and guest views consistent.
	Cache string `yaml:"cache,omitempty" json:"cache,omitempty"`
}

// Share types: how a shared folder reaches the guest.
const (
	TypeVirtiofs = "virtiofs"
	Type9p       = "9p"
)

// Share is one host folder exported to the guest under Tag and mounted at
// GuestPath; Shares resolves the config's mounts into these, and a VM
// driver exports them (driver.Spec.Shares).
type Share struct {
	Tag       string
	HostPath  string
	GuestPath string // where the guest mounts it; drivers do not need it
	ReadOnly  bool
	Type      string   // TypeVirtiofs or Type9p
	Exclude   []string `json:",omitempty"` // subfolders kept on the guest's data disk instead; drivers ignore it
	Inotify   bool     `json:",omitempty"` // host edits become guest inotify events (the host agent's job; drivers ignore it)
	Cache     string   `json:",omitempty"` // caching mode (CacheModes); empty: the type's default
}

// CacheModes are the accepted cache settings per share type, the default
// first: virtiofsd's --cache (qemu only; vz's virtiofs has no setting) and
// the 9p client's cache= option.
var CacheModes = map[string][]string{
	TypeVirtiofs: {"auto", "always", "never"},
	Type9p:       {"mmap", "loose", "none"},
}

// Mount modes.
const (
	ModeShare = "share"
	ModeSync  = "sync"
)

// IsSync reports whether m is a sync mount.
func (m Mount) IsSync() bool { return m.Mode == ModeSync }

// MaxExcludes bounds a mount's exclude list: each is a bind mount in the
// guest.
const MaxExcludes = 64

// FlagGrammar is the form of a -V value, quoted in its errors.
const FlagGrammar = "path[:guestpath][:ro|rw|w|sync] (guestpath absolute; ro is the default, rw and w mean writable, sync a two-way synced copy)"

// ParseFlag parses one `-V path[:guestpath][:mode]` value. Shares are
// read-only unless the mode is rw (or w). A colon inside a path cannot be
// told apart from the separator, so it is refused with a pointer to the
// YAML form.
func ParseFlag(s string) (Mount, error) {
	if strings.TrimSpace(s) == "" {
		return Mount{}, fmt.Errorf("mount %q: empty; accepted: %s", s, FlagGrammar)
	}
	parts := strings.Split(s, ":")
	m := Mount{Location: parts[0]}
	if m.Location == "" {
		return Mount{}, fmt.Errorf("mount %q: the host path is empty; accepted: %s", s, FlagGrammar)
	}
	rest := parts[1:]
	hasMode := false
	if n := len(rest); n > 0 {
		if rest[n-1] == ModeSync {
			m.Mode, m.Writable, hasMode = ModeSync, true, true
			rest = rest[:n-1]
		} else if w, ok := parseMode(rest[n-1]); ok {
			m.Writable, hasMode = w, true
			rest = rest[:n-1]
		}
	}
	switch {
	case len(rest) == 0:
	case len(rest) == 1 && strings.HasPrefix(rest[0], "/"):
		m.GuestPath = rest[0]
	case len(rest) == 1 && !hasMode && !strings.Contains(rest[0], "/"):
		// path:word — a mistyped mode more likely than a relative guest path.
		return Mount{}, fmt.Errorf("mount %q: %q is neither a mode nor an absolute guest path; accepted: %s", s, rest[0], FlagGrammar)
	case len(rest) == 1 && hasMode:
		return Mount{}, fmt.Errorf("mount %q: guest path %q is relative; accepted: %s", s, rest[0], FlagGrammar)
	case len(rest) == 2 && strings.HasPrefix(rest[0], "/") && !strings.HasPrefix(rest[1], "/"):
		return Mount{}, fmt.Errorf("mount %q: mode %q is not accepted; accepted: ro, rw, w or sync, as in %s", s, rest[1], FlagGrammar)
	default:
		return Mount{}, fmt.Errorf("mount %q: a ':' inside a path is not supported with -V (accepted: %s); list it under mounts: in vmdock.yaml instead", s, FlagGrammar)
	}
	return m, nil
}

// parseMode reads the optional last field of -V: whether it is a mode,
// and if so whether the share is writable.
func parseMode(s string) (writable, ok bool) {
	switch s {
	case "ro":
		return false, true
	case "rw", "w":
		return true, true
	}
	return false, false
}

// Tag is the share tag of the i-th mount: the guest finds the share by it.
func Tag(i int) string { return fmt.Sprintf("vmdock%d", i) }

// Shares turns mounts into the final shares, in list order: the driver
// exports each under its tag (vmdock0, vmdock1, ...) and the guest mounts
// it at its guest path. A mount without its own type gets defaultType (the
// instance's mountType), one without a guest path appears at its host path,
// and only writable mounts are writable. This is the one place these rules
// live: the host agent, status and bench all read shares from here. Mounts
// should already be resolved (Resolve).
func Shares(ms []Mount, defaultType string) []Share {
	out := make([]Share, 0, len(ms))
	for i, m := range ms {
		if m.IsSync() {
			continue // not a device: see Syncs
		}
		sh := Share{Tag: Tag(i), HostPath: m.Location, GuestPath: m.GuestPath, ReadOnly: !m.Writable, Type: m.Type, Exclude: m.Exclude,
			Inotify: m.Inotify == nil || *m.Inotify, Cache: m.Cache}
		if sh.Type == "" {
			sh.Type = defaultType
		}
		if sh.GuestPath == "" {
			sh.GuestPath = m.Location
		}
		out = append(out, sh)
	}
	return out
}

// Sync is one resolved sync mount: the host folder, where the guest sees
// it, and the subfolders that stay in the guest only.
type Sync struct {
	ID        string // stable per host folder: names its session and guest copy
	HostPath  string
	GuestPath string
	Exclude   []string
	// HostToGuest: the host's changes reach the guest copy, the guest's
	// stay there (a sandbox's workspace).
	HostToGuest bool
}

// Syncs lists the sync mounts of ms, in list order (see Shares for the
// others). Mounts should already be resolved.
func Syncs(ms []Mount) []Sync {
	var out []Sync
	for _, m := range ms {
		if !m.IsSync() {
			continue
		}
		guest := m.GuestPath
		if guest == "" {
			guest = m.Location
		}
		out = append(out, Sync{ID: SyncID(m.Location), HostPath: m.Location, GuestPath: guest, Exclude: m.Exclude})
	}
	return out
}

// SyncID names a host folder's sync session and guest copy: a hash, so it
// stays the same whatever the mount's place in the list, and is safe as a
// file name.
func SyncID(hostPath string) string {
	sum := sha256.Sum256([]byte(hostPath))
	return "s" + hex.EncodeToString(sum[:8])
}

// Resolve expands a leading ~ against home, cleans the paths and fills an
// empty GuestPath with the host path, so a folder appears at the same path in
// the guest. It touches no files; Check does that.
func Resolve(ms []Mount, home string) []Mount {
	out := make([]Mount, 0, len(ms))
	for _, m := range ms {
		m.Location = expandHome(m.Location, home)
		if m.Location != "" {
			m.Location = filepath.Clean(m.Location)
		}
		if m.GuestPath == "" {
			m.GuestPath = m.Location
		} else {
			m.GuestPath = filepath.Clean(expandHome(m.GuestPath, home))
		}
		out = append(out, m)
	}
	return out
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// guestReserved are guest folders a share must not cover: the guest OS and
// Docker live there.
var guestReserved = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/proc", "/run", "/sbin", "/sys", "/usr", "/var/lib/docker"}

// Check reports every problem with resolved mounts at once: relative or
// missing host folders, host folders nested in one another, and guest paths
// that repeat or cover the guest's own system folders.
func Check(ms []Mount) error {
	var errs []error
	for i, m := range ms {
		name := fmt.Sprintf("mounts[%d]", i)
		switch {
		case m.Location == "":
			errs = append(errs, fmt.Errorf("%s: location is empty; accepted: an absolute path to an existing folder", name))
			continue
		case !filepath.IsAbs(m.Location):
			errs = append(errs, fmt.Errorf("%s: location %q is relative; accepted: an absolute path (or ~/...) to an existing folder", name, m.Location))
			continue
		}
		if fi, err := os.Stat(m.Location); err != nil {
			errs = append(errs, fmt.Errorf("%s: location %q does not exist; accepted: an existing folder", name, m.Location))
		} else if !fi.IsDir() {
			errs = append(errs, fmt.Errorf("%s: location %q is not a folder; accepted: an existing folder", name, m.Location))
		}
		errs = append(errs, checkExcludes(name, m.Exclude)...)
		switch m.Mode {
		case "", ModeShare:
		case ModeSync:
			if m.Type != "" {
				errs = append(errs, fmt.Errorf("%s: type %q applies to share mounts; a sync mount has none (remove type, or use mode: share)", name, m.Type))
			}
			if !m.Writable {
				errs = append(errs, fmt.Errorf("%s: a sync mount is two-way; accepted: writable: true with mode: sync (or mode: share for a read-only folder)", name))
			}
			if m.Inotify != nil {
				errs = append(errs, fmt.Errorf("%s: inotify applies to share mounts; a sync mount's copy raises inotify events itself (remove inotify)", name))
			}
			if m.Cache != "" {
				errs = append(errs, fmt.Errorf("%s: cache applies to share mounts; a sync mount's copy is on the guest's disk (remove cache)", name))
			}
		default:
			errs = append(errs, fmt.Errorf("%s: mode %q is not accepted; accepted: share, sync", name, m.Mode))
		}
		if !filepath.IsAbs(m.GuestPath) {
			errs = append(errs, fmt.Errorf("%s: mountPoint %q is relative; accepted: an absolute guest path", name, m.GuestPath))
		} else if r := reserved(m.GuestPath); r != "" {
			errs = append(errs, fmt.Errorf("%s: mountPoint %q would hide the guest's %s; accepted: any other absolute guest path", name, m.GuestPath, r))
		}
	}
	for i := range ms {
		for j := i + 1; j < len(ms); j++ {
			a, b := ms[i], ms[j]
			if a.Location != "" && b.Location != "" && (within(a.Location, b.Location) || within(b.Location, a.Location)) && !syncInShare(a, b) {
				errs = append(errs, fmt.Errorf("mounts[%d] %q and mounts[%d] %q overlap; accepted: folders that are not inside one another (share only the outer one)", i, a.Location, j, b.Location))
			}
			if a.GuestPath != "" && a.GuestPath == b.GuestPath {
				errs = append(errs, fmt.Errorf("mounts[%d] and mounts[%d] both use mountPoint %q; accepted: a distinct guest path for each mount", i, j, a.GuestPath))
			}
		}
	}
	return errors.Join(errs...)
}

// checkExcludes accepts clean relative paths inside the mount, each once.
func checkExcludes(name string, ex []string) []error {
	if len(ex) > MaxExcludes {
		return []error{fmt.Errorf("%s: %d excludes; accepted: at most %d", name, len(ex), MaxExcludes)}
	}
	var errs []error
	seen := map[string]bool{}
	for _, e := range ex {
		clean := filepath.Clean(e)
		switch {
		case e == "" || filepath.IsAbs(e) || clean != e || clean == "." || clean == ".." || strings.HasPrefix(clean, "../"):
			errs = append(errs, fmt.Errorf("%s: exclude %q is not accepted; accepted: a clean path relative to the mount, inside it (e.g. node_modules or web/vendor)", name, e))
		case seen[e]:
			errs = append(errs, fmt.Errorf("%s: exclude %q is listed twice; accepted: each path once", name, e))
		}
		seen[e] = true
	}
	for _, a := range ex {
		for _, b := range ex {
			if a != b && within(b, a) {
				errs = append(errs, fmt.Errorf("%s: exclude %q is inside exclude %q; accepted: paths not inside one another (list only the outer one)", name, b, a))
			}
		}
	}
	return errs
}

// syncInShare allows the one nesting that works: a sync mount inside a
// shared folder (a project under the shared home), whose copy the guest
// mounts over the share at a deeper path.
func syncInShare(a, b Mount) bool {
	if a.IsSync() == b.IsSync() || a.Location == b.Location {
		return false
	}
	sync, share := a, b
	if b.IsSync() {
		sync, share = b, a
	}
	return within(sync.Location, share.Location) && within(sync.GuestPath, share.GuestPath) && sync.GuestPath != share.GuestPath
}

func reserved(guest string) string {
	if guest == "/" {
		return "root folder"
	}
	for _, r := range guestReserved {
		if within(guest, r) || within(r, guest) {
			return r
		}
	}
	return ""
}

// within reports whether p is parent or inside parent (both clean, absolute).
func within(p, parent string) bool {
	if p == parent {
		return true
	}
	if parent == "/" {
		return true
	}
	return strings.HasPrefix(p, parent+"/")
}
