// Package watchscope decides which host folders a share's change watch
// leaves out. The host agent touches every path the watch reports in the
// guest, so a folder that changes by itself all the time costs a touch per
// change, and one that vmdock itself writes (its VM disks, its logs, its
// image cache) feeds each touch back as another change: a loop. Such
// folders are skipped when they lie inside a share; the rule is the same
// on every OS, only the list of folders differs.
package watchscope

import (
	"path/filepath"
	"sort"
	"strings"
)

// Folder is a host folder share watches leave out, and why.
type Folder struct {
	Path string // absolute and clean, as named
	// Real is Path with symlinks resolved (see Resolve); "" when unknown,
	// and Path stands for it.
	Real string
	Why  string
}

// Skip is a folder inside a share that the share's watch leaves out.
type Skip struct {
	Rel  string // relative to the share's root: an exclude of its watch
	Path string // the root joined with Rel, as the user named the root
	Why  string
}

// Skips returns the folders that the watch of the share at root leaves
// out, sorted by Rel. rootReal is root with symlinks resolved ("" when
// unknown).
//
// A folder counts where it really is: the watchers do not follow
// symlinks, and FSEvents names paths with them resolved. So a link inside
// the share that leads out of it skips nothing, and a folder named through
// a link outside the share that leads into it is skipped. A folder that is
// the share or holds it skips nothing: the user shared it on purpose, and
// folders outside the share are none of its watch's business. A folder
// inside another one skipped is covered by it; two names for the same
// folder become one skip with both reasons.
func Skips(root, rootReal string, folders []Folder) []Skip {
	if rootReal == "" {
		rootReal = root
	}
	var found []Skip
	for _, f := range folders {
		real := f.Real
		if real == "" {
			real = f.Path
		}
		if rel, ok := inside(rootReal, real); ok {
			found = append(found, Skip{Rel: rel, Path: filepath.Join(root, rel), Why: f.Why})
		}
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].Rel < found[j].Rel })
	var out []Skip
next:
	for _, s := range found {
		for i, k := range out {
			switch {
			case s.Rel == k.Rel:
				if s.Why != k.Why && !strings.Contains(k.Why, s.Why) {
					out[i].Why += "; " + s.Why
				}
				continue next
			case strings.HasPrefix(s.Rel, k.Rel+string(filepath.Separator)):
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// Rels are the skips' Rel fields, to add to a watch's excludes.
func Rels(skips []Skip) []string {
	out := make([]string, len(skips))
	for i, s := range skips {
		out[i] = s.Rel
	}
	return out
}

// inside is p relative to root when p lies below root (not root itself).
func inside(root, p string) (string, bool) {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || !filepath.IsLocal(rel) {
		return "", false
	}
	return rel, true
}
