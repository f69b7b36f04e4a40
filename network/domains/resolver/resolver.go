// Package resolver points the system resolver at vmdock's DNS responder
// for vmdock.localhost only (`vmdock domains resolver add|remove`), so
// clients that ask the system (Safari, Python) find container names too.
// Browsers and curl need none of this: they resolve *.localhost to
// loopback themselves.
package resolver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmdock/vmdock/network/domains"
)

// DirEnv moves macOS's /etc/resolver, so tests touch nothing real.
const DirEnv = "VMDOCK_RESOLVER_DIR"

// marker starts every file vmdock writes; a file without it is not
// vmdock's and is never replaced or removed.
const marker = "# vmdock container domains"

// Runner runs one command, through sudo when sudo is set, printing it
// first (trust.ExecRunner).
type Runner func(ctx context.Context, sudo bool, argv ...string) error

// Resolver is one add or remove.
type Resolver struct {
	Port   int // the DNS responder's port on 127.0.0.1 (domains.dnsPort)
	Out    io.Writer
	Run    Runner
	Getenv func(string) string
	Root   bool
}

// Add points the system resolver at the responder (see add in the
// platform files).
func (r *Resolver) Add(ctx context.Context) error { return add(ctx, r) }

// Remove takes that away again.
func (r *Resolver) Remove(ctx context.Context) error { return remove(ctx, r) }

func (r *Resolver) path() string {
	dir := r.Getenv(DirEnv)
	if dir == "" {
		dir = "/etc/resolver"
	}
	return filepath.Join(dir, domains.Suffix)
}

func (r *Resolver) content() []byte {
	return fmt.Appendf(nil, "%s: `vmdock domains resolver remove` takes this away\nnameserver 127.0.0.1\nport %d\n", marker, r.Port)
}

// darwinAdd writes /etc/resolver/vmdock.localhost: macOS sends queries for
// that domain, and only those, to the nameserver and port it names.
func darwinAdd(ctx context.Context, r *Resolver) error {
	if r.Port < 1 || r.Port > 65535 {
		return fmt.Errorf("domains.dnsPort %d is not accepted here; accepted: a port 1-65535 (0 turns the DNS responder off)", r.Port)
	}
	path := r.path()
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(old, r.content()):
		fmt.Fprintf(r.Out, "%s already points at port %d\n", path, r.Port)
		return nil
	case err == nil && !bytes.HasPrefix(old, []byte(marker)):
		return fmt.Errorf("%s exists and vmdock did not write it; remove it yourself to let vmdock write its own", path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read %s: %w", path, err)
	}
	tmp, err := os.CreateTemp("", "vmdock-resolver-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(r.content()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := r.Run(ctx, !r.Root, "mkdir", "-p", filepath.Dir(path)); err != nil {
		return fmt.Errorf("make %s: %w", filepath.Dir(path), err)
	}
	if err := r.Run(ctx, !r.Root, "install", "-m", "0644", tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fmt.Fprintf(r.Out, "%s sends *.%s to 127.0.0.1 port %d (vmdock's responder, while a profile with domains runs)\n", path, domains.Suffix, r.Port)
	return nil
}

func darwinRemove(ctx context.Context, r *Resolver) error {
	path := r.path()
	old, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(r.Out, "%s: absent, nothing to remove\n", path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if !bytes.HasPrefix(old, []byte(marker)) {
		return fmt.Errorf("%s was not written by vmdock; it is left as it is", path)
	}
	if err := r.Run(ctx, !r.Root, "rm", "-f", path); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	fmt.Fprintf(r.Out, "removed %s\n", path)
	return nil
}

// linuxNote is why Linux needs no resolver file.
var linuxNote = strings.Join([]string{
	"on Linux the system resolver needs no entry from vmdock: systemd-resolved answers *.localhost with loopback itself,",
	"and without it nss-myhostname does (package libnss-myhostname; `myhostname` in the hosts: line of /etc/nsswitch.conf)",
}, " ")

func linux(context.Context, *Resolver) error { return errors.New(linuxNote) }
