package review

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// Guest runs argv in the guest, stdin to it and its stdout to stdout.
type Guest func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error

// Workspace is one sandbox's folder on both sides.
type Workspace struct {
	Host      string // the host folder
	GuestPath string // the guest copy's path (the host's path, in a sandbox)
	BasePath  string // the base's file, in the instance folder
	Guest     Guest
}

// Kinds of change.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
)

// Change is one of the agent's changes.
type Change struct {
	Path string
	Kind string
	// Conflict: the host's file changed too since both sides last agreed;
	// accept refuses it.
	Conflict bool
	Binary   bool
	host     entry
	guest    entry
}

// Review is both sides as read now, and the agent's changes.
type Review struct {
	w       Workspace
	base    map[string]string
	host    map[string]entry
	Changes []Change
}

// RecordBase saves the host folder as it is now as the base: what the
// guest's copy starts from.
func RecordBase(host, basePath string) error {
	tree, err := hostTree(host)
	if err != nil {
		return err
	}
	base := map[string]string{}
	for p, e := range tree {
		base[p] = e.sig
	}
	return saveBase(basePath, base)
}

// Read reads both sides and sorts out the agent's changes.
func (w Workspace) Read(ctx context.Context) (*Review, error) {
	base, err := loadBase(w.BasePath)
	if err != nil {
		return nil, err
	}
	host, err := hostTree(w.Host)
	if err != nil {
		return nil, err
	}
	if base == nil {
		// No base recorded (a sandbox made in its YAML, not by `sandbox
		// create`): the host's folder as it is stands for it.
		base = map[string]string{}
		for p, e := range host {
			base[p] = e.sig
		}
	}
	guest, err := w.readGuest(ctx, host)
	if err != nil {
		return nil, err
	}
	r := &Review{w: w, base: base, host: host}
	r.sortOut(guest)
	return r, r.save()
}

// readGuest streams the guest's copy as a tar and sums it (only what
// differs from host is held).
func (w Workspace) readGuest(ctx context.Context, host map[string]entry) (map[string]entry, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := w.Guest(ctx, []string{"tar", "-C", w.GuestPath, "-cf", "-", "."}, nil, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	guest, err := guestTree(pr, host)
	if err != nil {
		cancel()
		pr.CloseWithError(err)
	} else {
		_, _ = io.Copy(io.Discard, pr) // tar pads its end: the writer finishes
	}
	if gerr := <-done; gerr != nil {
		return nil, fmt.Errorf("read the guest's copy of %s: %w", w.GuestPath, gerr)
	}
	return guest, err
}

// sortOut classifies every path either side or the base has; where both
// sides agree, that is the new base.
func (r *Review) sortOut(guest map[string]entry) {
	paths := map[string]bool{}
	for _, m := range []map[string]entry{r.host, guest} {
		for p := range m {
			paths[p] = true
		}
	}
	for p := range r.base {
		paths[p] = true
	}
	for p := range paths {
		h, g, b := r.host[p], guest[p], r.base[p]
		switch {
		case h.sig == g.sig:
			r.setBase(p, h.sig)
		case g.sig == b:
			// The host's change, on its way in.
		default:
			c := Change{Path: p, Kind: Modified, Conflict: h.sig != b, host: h, guest: g}
			if h.sig == "" {
				c.Kind = Added
			} else if g.sig == "" {
				c.Kind = Deleted
			}
			c.Binary = binary(h) || binary(g)
			r.Changes = append(r.Changes, c)
		}
	}
	sort.Slice(r.Changes, func(i, j int) bool { return r.Changes[i].Path < r.Changes[j].Path })
}

func (r *Review) setBase(p, sig string) {
	if sig == "" {
		delete(r.base, p)
	} else {
		r.base[p] = sig
	}
}

func binary(e entry) bool {
	return e.tooBig || bytes.IndexByte(e.content, 0) >= 0
}

// selected are the changes under paths (all when none given); a path
// that names no change is an error.
func (r *Review) selected(paths []string) ([]Change, error) {
	if len(paths) == 0 {
		return r.Changes, nil
	}
	var out []Change
	for _, p := range paths {
		p, ok := cleanName(strings.TrimSuffix(p, "/"))
		if !ok {
			return nil, fmt.Errorf("path %q is outside the workspace; accepted: a path inside it, relative to it", p)
		}
		n := len(out)
		for _, c := range r.Changes {
			if c.Path == p || strings.HasPrefix(c.Path, p+"/") {
				out = append(out, c)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("path %q has no change of the agent's; `vmdock sandbox diff` lists them", p)
		}
	}
	return out, nil
}

func loadBase(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the sandbox's base: %w", err)
	}
	base := map[string]string{}
	if err := json.Unmarshal(b, &base); err != nil {
		return nil, fmt.Errorf("read the sandbox's base %s: %w", path, err)
	}
	return base, nil
}

func (r *Review) save() error { return saveBase(r.w.BasePath, r.base) }

func saveBase(path string, base map[string]string) error {
	b, err := json.Marshal(base)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("save the sandbox's base: %w", err)
	}
	return nil
}
