// Package atomicfile replaces files so that readers, and the disk after a
// crash or power loss, see either the old content or the new one: never a
// half-written or empty file.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// WriteFile replaces path with data, with exactly the mode perm (the umask
// does not apply: callers ask for 0600 on private files and mean it).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// ReplaceFile is WriteFile for a path that may be a symlink to replace:
// the link itself gives way to a regular file, its target is untouched.
func ReplaceFile(path string, data []byte, perm os.FileMode) error {
	err := replace(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Write replaces path with what fill writes: into a temp file in the same
// folder (so the rename cannot cross file systems), fsynced, renamed over
// path, then the folder fsynced so the rename itself survives a crash. On
// any failure path is untouched and the temp file is removed. A symlink at
// path is kept and its target replaced, as an in-place write would.
func Write(path string, perm os.FileMode, fill func(io.Writer) error) error {
	target, err := resolve(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := replace(target, perm, fill); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func replace(path string, perm os.FileMode, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	// The ".<name>.tmp-" prefix marks it as ours: instance cleanup and
	// `delete` recognise it as a leftover of an atomic write.
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := fill(tmp); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	renamed = true
	return syncDir(dir)
}

// resolve follows a symlink at path to the file it names, so replacing
// a linked dotfile (~/.docker/config.json) keeps the link.
func resolve(path string) (string, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Mode()&fs.ModeSymlink == 0 {
		return path, nil
	}
	if err != nil {
		return "", err
	}
	target, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A dangling link: create the file it points to.
		return danglingTarget(path)
	}
	return target, err
}

func danglingTarget(path string) (string, error) {
	dest, err := os.Readlink(path)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(dest) {
		dest = filepath.Join(filepath.Dir(path), dest)
	}
	return dest, nil
}

// syncDir makes a rename in dir durable. File systems that cannot fsync a
// folder (some network and FUSE ones) say EINVAL or ENOTSUP; the rename
// is then as durable as they allow, which is not an error of ours.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync folder: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("sync folder: %w", err)
	}
	return nil
}

// Commit makes a finished temp file durable and renames it to path, then
// fsyncs path's folder. It is for content that must be checked (a digest,
// a disk header) between writing and replacing, where Write's callback
// does not fit. tmp must be on the same file system as path; on failure
// tmp is left for the caller to remove.
func Commit(tmp, path string) error {
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("commit %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("commit %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("commit %s: %w", path, err)
	}
	return nil
}

func syncFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
