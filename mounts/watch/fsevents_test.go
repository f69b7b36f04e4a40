package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestDecodeItemFlags(t *testing.T) {
	// Created | InodeMetaMod | IsFile, as FSEvents reports a new file.
	ev := decodeItem("/p", 0x100|0x400|0x10000)
	if !ev.created || ev.removed || ev.renamed || ev.modified || ev.dropped {
		t.Errorf("created file: %+v", ev)
	}
	if ev := decodeItem("/p", 0x1000); !ev.modified || ev.created {
		t.Errorf("modified: %+v", ev)
	}
	if ev := decodeItem("/p", 0x800|0x200); !ev.renamed || !ev.removed {
		t.Errorf("renamed away: %+v", ev)
	}
	for _, f := range []uint32{0x1, 0x2, 0x4} {
		if ev := decodeItem("/", f); !ev.dropped {
			t.Errorf("flags %#x: not a drop", f)
		}
	}
	if ev := decodeItem("/p", 0x400|0x4000|0x8000); ev.created || ev.removed || ev.renamed || ev.modified || ev.dropped {
		t.Errorf("attributes only: %+v", ev)
	}
}

// The loop share inotify would run into on macOS: a host edit is touched
// in the guest, which FSEvents reports back, often with the path's earlier
// creation still in its flags. Each change is reported once; each echo is
// not.
func TestEchoFilterReportsChangesNotEchoes(t *testing.T) {
	state := map[string]fileState{}
	f := newEchoFilter()
	f.stat = func(p string) fileState {
		if st, ok := state[p]; ok {
			return st
		}
		return fileState{gone: true}
	}
	const p = "/src/app/index.js"
	steps := []struct {
		what   string
		set    *fileState // the file's state before the report (nil: removed)
		ev     itemEvent
		want   Op
		report bool
	}{
		{"host creates", &fileState{modTime: 1, size: 10}, itemEvent{created: true}, Listing, true},
		{"guest touch echoes", &fileState{modTime: 1, size: 10}, itemEvent{created: true}, 0, false},
		{"attributes only", &fileState{modTime: 1, size: 10}, itemEvent{}, 0, false},
		{"host edits", &fileState{modTime: 2, size: 12}, itemEvent{created: true, modified: true}, Changed, true},
		{"echo of the edit", &fileState{modTime: 2, size: 12}, itemEvent{created: true, modified: true}, 0, false},
		{"host chmod +x", &fileState{modTime: 2, size: 12, mode: 0o755}, itemEvent{modified: true}, Changed, true},
		{"host removes", nil, itemEvent{removed: true}, Listing, true},
		{"removal repeated", nil, itemEvent{created: true, removed: true}, 0, false},
		{"host makes it again", &fileState{modTime: 3, size: 1}, itemEvent{created: true, removed: true}, Listing, true},
	}
	for _, s := range steps {
		if s.set == nil {
			delete(state, p)
		} else {
			state[p] = *s.set
		}
		s.ev.path = p
		op, report := f.op(s.ev)
		if report != s.report || (report && op != s.want) {
			t.Fatalf("%s: op %v report %v, want %v %v", s.what, op, report, s.want, s.report)
		}
	}
	// A file first seen being written (not created since the watch began).
	state["/src/app/old.js"] = fileState{modTime: 5}
	if op, ok := f.op(itemEvent{path: "/src/app/old.js", modified: true}); !ok || op != Changed {
		t.Errorf("first edit of an existing file: %v %v, want Changed", op, ok)
	}
}

func TestEchoFilterStaysBounded(t *testing.T) {
	f := newEchoFilter()
	f.stat = func(string) fileState { return fileState{modTime: 1} }
	for i := range maxEchoPaths + 10 {
		f.op(itemEvent{path: fmt.Sprintf("/x/%d", i), created: true})
	}
	if len(f.seen) > maxEchoPaths {
		t.Fatalf("%d paths remembered, cap %d", len(f.seen), maxEchoPaths)
	}
}

// FSEvents names paths with symlinks resolved; reports map back to the
// tree's own spelling, and excluded folders are dropped.
func TestRealTreesMapsResolvedPaths(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.MkdirAll(filepath.Join(real, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	rt := newRealTrees([]Tree{{ID: "a", Dir: "/elsewhere"}, {ID: "b", Dir: link, Exclude: []string{"node_modules", "Library/Application Support/vmdock"}}})
	resolved, _ := filepath.EvalSymlinks(real)
	cases := []struct {
		in   string
		tree int
		out  string
		ok   bool
	}{
		{filepath.Join(resolved, "src", "x.js"), 1, filepath.Join(link, "src", "x.js"), true},
		{resolved, 1, link, true},
		{filepath.Join(resolved, "node_modules", "y.js"), 0, "", false},
		// A nested exclude (a folder the host agent leaves out of a share).
		{filepath.Join(resolved, "Library", "Application Support", "vmdock", "blobs", "b"), 0, "", false},
		{filepath.Join(resolved, "Library", "Application Support", "vmdock"), 0, "", false},
		{filepath.Join(resolved, "Library", "Application Support", "vmdock2"), 1, filepath.Join(link, "Library", "Application Support", "vmdock2"), true},
		{"/elsewhere/z", 0, "/elsewhere/z", true},
		{"/nowhere/z", 0, "", false},
	}
	for _, c := range cases {
		tree, out, ok := rt.find(c.in)
		if ok != c.ok || (ok && (tree != c.tree || out != c.out)) {
			t.Errorf("find(%q) = %d %q %v; want %d %q %v", c.in, tree, out, ok, c.tree, c.out, c.ok)
		}
	}
}
