package guestos

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// BuildkitUnit is buildkit's systemd unit, present when the image has
// buildkit (the containerd runtime's builder).
const BuildkitUnit = "/usr/lib/systemd/system/buildkit.service"

// Sys is the guest system a feature works on.
type Sys struct {
	Log *slog.Logger
	OS  OS
	// Root prefixes the files a feature edits (/etc, /run, /proc/self/
	// mountinfo, binfmt_misc); "" means the real root. Tests use a temp dir.
	Root string
}

// Path is p under the root.
func (s Sys) Path(p string) string {
	if s.Root == "" {
		return p
	}
	return filepath.Join(s.Root, p)
}

// Logger is the log, slog's default without one.
func (s Sys) Logger() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// MountedAt returns the last mount on target (the one visible), if any.
func (s Sys) MountedAt(target string) (MountEntry, bool, error) {
	ms, err := ReadMounts(s.Path("/proc/self/mountinfo"))
	if err != nil {
		return MountEntry{}, false, err
	}
	var found MountEntry
	ok := false
	for _, m := range ms {
		if m.Target == target {
			found, ok = m, true
		}
	}
	return found, ok, nil
}

// MountOnce creates target and runs mount args unless target is mounted.
func (s Sys) MountOnce(ctx context.Context, target string, args ...string) error {
	return s.MountOnceWith(target, func() error {
		_, err := s.OS.Run(ctx, "mount", args...)
		return err
	})
}

// MountOnceWith creates target and calls mount unless target is mounted.
func (s Sys) MountOnceWith(target string, mount func() error) error {
	if _, ok, err := s.MountedAt(target); err != nil || ok {
		return err
	}
	if err := os.MkdirAll(s.Path(target), 0o755); err != nil {
		return err
	}
	return mount()
}

// WriteFile survives the guest being powered off mid-write: a torn
// /etc/hosts or daemon.json would break the next boot.
func WriteFile(p string, b []byte, mode os.FileMode) error {
	return atomicfile.WriteFile(p, b, mode)
}
