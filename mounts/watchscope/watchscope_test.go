package watchscope

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestSkips(t *testing.T) {
	lib := Folder{Path: "/Users/u/Library", Why: "library"}
	vmHome := Folder{Path: "/Users/u/.vmdock", Why: "vm home"}
	cache := Folder{Path: "/Users/u/Library/Caches/vmdock", Why: "cache"}
	tests := []struct {
		name           string
		root, rootReal string
		folders        []Folder
		want           []Skip
	}{
		{"the folders inside the share, sorted", "/Users/u", "", []Folder{vmHome, {Path: "/Users/u/.cache/vmdock", Why: "cache"}},
			[]Skip{{".cache/vmdock", "/Users/u/.cache/vmdock", "cache"}, {".vmdock", "/Users/u/.vmdock", "vm home"}}},
		{"folders outside the share are irrelevant", "/Users/u/src", "", []Folder{vmHome, lib, {Path: "/var/vmdock", Why: "x"}},
			nil},
		{"a folder that is the share or holds it skips nothing", "/Users/u/.vmdock", "", []Folder{vmHome, {Path: "/Users/u", Why: "home"}, {Path: "/", Why: "root"}},
			nil},
		{"a folder inside a skipped one is covered by it", "/Users/u", "", []Folder{cache, lib, {Path: "/Users/u/Library/Application Support/vmdock", Why: "files"}},
			[]Skip{{"Library", "/Users/u/Library", "library"}}},
		{"a shared name prefix is not nesting", "/Users/u", "", []Folder{vmHome, {Path: "/Users/u/.vmdock-old", Why: "old"}, {Path: "/Users/u/.vm", Why: "short"}},
			[]Skip{{".vm", "/Users/u/.vm", "short"}, {".vmdock", "/Users/u/.vmdock", "vm home"}, {".vmdock-old", "/Users/u/.vmdock-old", "old"}}},
		{"two names for one folder, both reasons", "/Users/u", "", []Folder{vmHome, {Path: "/Users/u/.vmdock", Why: "cache"}, {Path: "/Users/u/.vmdock", Why: "vm home"}},
			[]Skip{{".vmdock", "/Users/u/.vmdock", "vm home; cache"}}},
		{"a share named through a symlink", "/tmp/h", "/private/tmp/h", []Folder{{Path: "/tmp/h/.vmdock", Real: "/private/tmp/h/.vmdock", Why: "vm home"}},
			[]Skip{{".vmdock", "/tmp/h/.vmdock", "vm home"}}},
		{"a link in the share that leads out of it skips nothing", "/Users/u", "/Users/u", []Folder{{Path: "/Users/u/vms", Real: "/Volumes/big/vms", Why: "vm home"}},
			nil},
		{"a link outside the share that leads into it", "/Users/u", "/Users/u", []Folder{{Path: "/opt/vmdock", Real: "/Users/u/.vmdock", Why: "vm home"}},
			[]Skip{{".vmdock", "/Users/u/.vmdock", "vm home"}}},
		{"a link inside the share to a folder inside it: where it really is", "/Users/u", "/Users/u", []Folder{{Path: "/Users/u/link/.vmdock", Real: "/Users/u/data/.vmdock", Why: "vm home"}},
			[]Skip{{"data/.vmdock", "/Users/u/data/.vmdock", "vm home"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Skips(tt.root, tt.rootReal, tt.folders)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Skips = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestRels(t *testing.T) {
	got := Rels([]Skip{{Rel: ".vmdock"}, {Rel: "Library"}})
	if !reflect.DeepEqual(got, []string{".vmdock", "Library"}) {
		t.Errorf("Rels = %q", got)
	}
}

// Resolve follows real symlinks, also for a folder that does not exist
// yet below one.
func TestResolve(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		link:                                   real,
		filepath.Join(link, "not/yet"):         filepath.Join(real, "not/yet"),
		filepath.Join(dir, "absent", "folder"): filepath.Join(dir, "absent", "folder"),
		real + "/":                             real,
	} {
		if got := Resolve(in); got != want {
			t.Errorf("Resolve(%q) = %q, want %q", in, got, want)
		}
	}
}

// vmdock's home and the image cache are always left out; the list ends
// with them whatever the OS adds before.
func TestDefaults(t *testing.T) {
	home := t.TempDir()
	got := Defaults(home, filepath.Join(home, ".vmdock"), filepath.Join(home, ".cache", "vmdock"))
	n := len(got)
	if n < 2 || got[n-2].Path != filepath.Join(home, ".vmdock") || got[n-1].Path != filepath.Join(home, ".cache", "vmdock") {
		t.Fatalf("Defaults = %+v", got)
	}
	for _, f := range got {
		if f.Real == "" || f.Why == "" {
			t.Errorf("%+v: no Real or no Why", f)
		}
	}
	if got := Defaults("", "", ""); len(got) != 0 {
		t.Errorf("Defaults of nothing = %+v", got)
	}
}

// On macOS ~/Library is left out, which also covers vmdock's files there.
func TestMacFolders(t *testing.T) {
	skips := Skips("/Users/u", "", append(macFolders("/Users/u"), Folder{Path: "/Users/u/.vmdock", Why: "vm home"}))
	want := []string{".vmdock", "Library"}
	if got := Rels(skips); !reflect.DeepEqual(got, want) {
		t.Errorf("skips of a shared home on macOS = %q, want %q", got, want)
	}
}
