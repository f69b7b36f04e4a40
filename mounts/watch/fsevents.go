package watch

import (
	"io/fs"
	"os"
	"path/filepath"
)

// This file is the platform-free half of the macOS backend
// (watch_fsevents.go): which FSEvents reports become OnPath calls. It
// builds everywhere so that its rules are tested on Linux.

// FSEvents flags (FSEvents.h, stable since macOS 10.7). They are spelled out
// here rather than taken from the cgo binding so that the decoding is plain
// Go, tested on Linux and type-checked by darwincheck, which fakes cgo.
const (
	fseventsNoDefer    = 0x2  // kFSEventStreamCreateFlagNoDefer: report the first event of a burst at once
	fseventsFileEvents = 0x10 // kFSEventStreamCreateFlagFileEvents: one report per file, not per folder

	itemMustScanSubDirs = 0x1
	itemUserDropped     = 0x2
	itemKernelDropped   = 0x4
	itemCreated         = 0x100
	itemRemoved         = 0x200
	itemRenamed         = 0x800
	itemModified        = 0x1000
)

// decodeItem decodes one report's flags.
func decodeItem(path string, flags uint32) itemEvent {
	return itemEvent{
		path:     path,
		created:  flags&itemCreated != 0,
		removed:  flags&itemRemoved != 0,
		renamed:  flags&itemRenamed != 0,
		modified: flags&itemModified != 0,
		dropped:  flags&(itemMustScanSubDirs|itemUserDropped|itemKernelDropped) != 0,
	}
}

// itemEvent is one FSEvents report about a path, its flags decoded.
type itemEvent struct {
	path                      string // as FSEvents names it: symlinks resolved
	created, removed, renamed bool
	modified                  bool // contents written
	dropped                   bool // events were lost (or a subtree needs a rescan)
}

// fileState is what a container can notice of a path: a touch that sets a
// file's times to what they were changes none of it.
type fileState struct {
	gone    bool
	modTime int64
	size    int64
	mode    fs.FileMode
}

// statFile reads a path's state; a path that cannot be read counts as gone.
func statFile(p string) fileState {
	fi, err := os.Lstat(p)
	if err != nil {
		return fileState{gone: true}
	}
	return fileState{modTime: fi.ModTime().UnixNano(), size: fi.Size(), mode: fi.Mode()}
}

// maxEchoPaths bounds echoFilter's memory; past it the filter starts over,
// which costs at most one extra touch per path.
const maxEchoPaths = 1 << 16

// echoFilter decides which FSEvents reports are changes. FSEvents reports
// the guest's touches (share inotify) as attribute changes, and a path's
// flags can carry along an earlier creation of it, so flags alone would
// let each touch come back as a new file and be touched again, forever.
// Comparing what a container can see (existence, mtime, size, mode) with
// the last report of the path breaks that loop.
type echoFilter struct {
	seen map[string]fileState
	stat func(string) fileState
}

func newEchoFilter() *echoFilter {
	return &echoFilter{seen: map[string]fileState{}, stat: statFile}
}

// op says whether ev is a change to report, and as which Op.
func (f *echoFilter) op(ev itemEvent) (Op, bool) {
	if !ev.created && !ev.removed && !ev.renamed && !ev.modified {
		return 0, false // attributes only: what the guest's own touch looks like
	}
	st := f.stat(ev.path)
	prev, known := f.seen[ev.path]
	if known && prev == st {
		return 0, false // nothing a container can see changed: an echo, or a repeat
	}
	if len(f.seen) >= maxEchoPaths {
		clear(f.seen)
	}
	f.seen[ev.path] = st
	if st.gone || !known && (ev.created || ev.renamed) || known && prev.gone {
		return Listing, true
	}
	if ev.modified || known {
		return Changed, true
	}
	return Listing, true
}

// realTrees maps FSEvents' paths back to the trees: FSEvents names paths
// with symlinks resolved (/tmp/x is /private/tmp/x), the trees as the
// user gave them.
type realTrees struct {
	trees []Tree
	real  []string // real[i]: trees[i].Dir with symlinks resolved
}

func newRealTrees(trees []Tree) realTrees {
	rt := realTrees{trees: trees}
	for _, t := range trees {
		real, err := filepath.EvalSymlinks(t.Dir)
		if err != nil {
			real = t.Dir
		}
		rt.real = append(rt.real, real)
	}
	return rt
}

// find returns the tree a reported path is in, and the path as the tree
// names it; ok false for a path outside every tree or excluded.
func (rt realTrees) find(p string) (tree int, path string, ok bool) {
	for i, real := range rt.real {
		rel, in := relTo(real, p)
		if !in {
			continue
		}
		if isExcluded(rt.trees[i], rel) {
			return 0, "", false
		}
		if rel == "." {
			return i, rt.trees[i].Dir, true
		}
		return i, filepath.Join(rt.trees[i].Dir, rel), true
	}
	return 0, "", false
}
