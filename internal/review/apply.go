package review

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Refusal is a change accept did not write, and why.
type Refusal struct{ Path, Why string }

// Accept writes the agent's changes under paths (all when none) into the
// host folder. A change whose host file changed since the sandbox got it
// (or since this review read it) is refused, as is a symlink that would
// point out of the workspace; everything is written through the
// workspace's root, so nothing lands outside it.
func (r *Review) Accept(paths []string) (accepted []string, refused []Refusal, err error) {
	changes, err := r.selected(paths)
	if err != nil {
		return nil, nil, err
	}
	root, err := os.OpenRoot(r.w.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("open the workspace: %w", err)
	}
	defer root.Close()
	for _, c := range changes {
		if why := r.refusal(root, c); why != "" {
			refused = append(refused, Refusal{Path: c.Path, Why: why})
			continue
		}
		if err := write(root, c); err != nil {
			return accepted, refused, errors.Join(err, r.save())
		}
		r.setBase(c.Path, c.guest.sig)
		accepted = append(accepted, c.Path)
	}
	return accepted, refused, r.save()
}

// refusal says why c may not be written, "" when it may.
func (r *Review) refusal(root *os.Root, c Change) string {
	switch {
	case c.Conflict:
		return "changed on the host too since the sandbox got it"
	case c.guest.tooBig:
		return fmt.Sprintf("over %d MiB", maxFileBytes>>20)
	case c.guest.isLink() && !linkInside(c.Path, strings.TrimPrefix(c.guest.sig, "l:")):
		return "a symlink out of the workspace"
	}
	if now := currentSig(root, c.Path); now != c.host.sig {
		return "changed on the host since the review read it"
	}
	return ""
}

// linkInside: target, relative to the link's folder, stays in the
// workspace.
func linkInside(p, target string) bool {
	if path.IsAbs(target) {
		return false
	}
	_, ok := cleanName(path.Join(path.Dir(p), target))
	return ok
}

func currentSig(root *os.Root, p string) string {
	fi, err := root.Lstat(p)
	switch {
	case err != nil:
		return ""
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := root.Readlink(p)
		if err != nil {
			return "?"
		}
		return "l:" + target
	case fi.Mode().IsRegular():
		b, err := root.ReadFile(p)
		if err != nil {
			return "?"
		}
		return fileSig(b, fi.Mode()&0o111 != 0)
	}
	return "?"
}

func write(root *os.Root, c Change) error {
	if c.host.sig != "" {
		if err := root.Remove(c.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("accept %s: %w", c.Path, err)
		}
	}
	if c.Kind == Deleted {
		return nil
	}
	if dir := path.Dir(c.Path); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("accept %s: %w", c.Path, err)
		}
	}
	if c.guest.isLink() {
		if err := root.Symlink(strings.TrimPrefix(c.guest.sig, "l:"), c.Path); err != nil {
			return fmt.Errorf("accept %s: %w", c.Path, err)
		}
		return nil
	}
	perm := os.FileMode(0o644)
	if c.guest.exec() {
		perm = 0o755
	}
	f, err := root.OpenFile(c.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("accept %s: %w", c.Path, err)
	}
	_, err = f.Write(c.guest.content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("accept %s: %w", c.Path, err)
	}
	return nil
}

// Reject puts the host's version of the agent's changes under paths (all
// when none) back into the guest's copy: created files go, changed and
// deleted ones come back as the host has them.
func (r *Review) Reject(ctx context.Context, paths []string) ([]string, error) {
	changes, err := r.selected(paths)
	if err != nil {
		return nil, err
	}
	if len(changes) == 0 {
		return nil, nil
	}
	root, err := os.OpenRoot(r.w.Host)
	if err != nil {
		return nil, fmt.Errorf("open the workspace: %w", err)
	}
	defer root.Close()
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	argv := []string{"sh", "-c", `cd -- "$1" && shift && rm -rf -- "$@" && tar -xf -`, "sh", r.w.GuestPath}
	var rejected []string
	for _, c := range changes {
		if err := addHostVersion(tw, root, c); err != nil {
			return nil, err
		}
		argv = append(argv, "./"+c.Path)
		rejected = append(rejected, c.Path)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := r.w.Guest(ctx, argv, &tarball, nil); err != nil {
		return nil, fmt.Errorf("put the host's version back in the guest: %w", err)
	}
	for _, c := range changes {
		r.setBase(c.Path, c.host.sig)
	}
	return rejected, r.save()
}

func addHostVersion(tw *tar.Writer, root *os.Root, c Change) error {
	fi, err := root.Lstat(c.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reject %s: %w", c.Path, err)
	}
	h := &tar.Header{Name: c.Path, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()}
	var content []byte
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		h.Typeflag = tar.TypeSymlink
		if h.Linkname, err = root.Readlink(c.Path); err != nil {
			return fmt.Errorf("reject %s: %w", c.Path, err)
		}
	case fi.Mode().IsRegular():
		h.Typeflag = tar.TypeReg
		if content, err = root.ReadFile(c.Path); err != nil {
			return fmt.Errorf("reject %s: %w", c.Path, err)
		}
		h.Size = int64(len(content))
	default:
		return nil
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = tw.Write(content)
	return err
}
