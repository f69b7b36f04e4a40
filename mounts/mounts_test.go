package mounts

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestParseFlag(t *testing.T) {
	tests := []struct {
		in      string
		want    Mount
		wantErr string
	}{
		{in: "/src", want: Mount{Location: "/src"}},
		{in: "/src:w", want: Mount{Location: "/src", Writable: true}},
		{in: "/src:/app", want: Mount{Location: "/src", GuestPath: "/app"}},
		{in: "/src:/app:w", want: Mount{Location: "/src", GuestPath: "/app", Writable: true}},
		{in: "~/My Projects:w", want: Mount{Location: "~/My Projects", Writable: true}},
		{in: "", wantErr: "empty"},
		{in: ":/app", wantErr: "host path is empty"},
		{in: "/a:b/c", wantErr: "':' inside a path"},
		{in: "/a:b:/c", wantErr: "':' inside a path"},
		{in: "/a:/b:/c:w", wantErr: "':' inside a path"},
		{in: "/a:ro", want: Mount{Location: "/a"}},
		{in: "/a:rw", want: Mount{Location: "/a", Writable: true}},
		{in: "/a:/app:ro", want: Mount{Location: "/a", GuestPath: "/app"}},
		{in: "/a:/app:rw", want: Mount{Location: "/a", GuestPath: "/app", Writable: true}},
		{in: "/a:rel", wantErr: `mount "/a:rel": "rel" is neither a mode nor an absolute guest path; accepted: path[:guestpath][:ro|rw|w|sync]`},
		{in: "/a:RO", wantErr: `"RO" is neither a mode`},
		{in: "/a:", wantErr: `"" is neither a mode`},
		{in: "/a:/app:rel", wantErr: `mode "rel" is not accepted; accepted: ro, rw, w or sync`},
		{in: "~/src/app:sync", want: Mount{Location: "~/src/app", Writable: true, Mode: ModeSync}},
		{in: "/src:/app:sync", want: Mount{Location: "/src", GuestPath: "/app", Writable: true, Mode: ModeSync}},
		{in: "/a:SYNC", wantErr: `"SYNC" is neither a mode`},
		{in: "/a:app:w", wantErr: `guest path "app" is relative`},
	}
	for _, tt := range tests {
		got, err := ParseFlag(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseFlag(%q) error = %v, want containing %q", tt.in, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("ParseFlag(%q) error spans lines: %q", tt.in, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseFlag(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestResolve(t *testing.T) {
	got := Resolve([]Mount{
		{Location: "~"},
		{Location: "~/a b/", GuestPath: "/app/"},
		{Location: "/x/../y"},
	}, "/home/u")
	want := []Mount{
		{Location: "/home/u", GuestPath: "/home/u"},
		{Location: "/home/u/a b", GuestPath: "/app"},
		{Location: "/y", GuestPath: "/y"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Resolve = %+v, want %+v", got, want)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	spaced := filepath.Join(dir, "with space")
	file := filepath.Join(dir, "file")
	for _, d := range []string{a, filepath.Join(a, "inner"), spaced} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		ms      []Mount
		wantErr []string // every substring must appear; empty: no error
	}{
		{name: "ok", ms: []Mount{{Location: a}, {Location: spaced, Writable: true}}},
		{name: "ok guest path", ms: []Mount{{Location: a, GuestPath: "/app"}}},
		{name: "relative", ms: []Mount{{Location: "rel"}}, wantErr: []string{`"rel" is relative`}},
		{name: "missing", ms: []Mount{{Location: filepath.Join(dir, "nope")}}, wantErr: []string{"does not exist"}},
		{name: "file", ms: []Mount{{Location: file}}, wantErr: []string{"not a folder"}},
		{name: "overlap", ms: []Mount{{Location: a}, {Location: filepath.Join(a, "inner"), GuestPath: "/x"}}, wantErr: []string{"overlap"}},
		{name: "same folder twice", ms: []Mount{{Location: a}, {Location: a, GuestPath: "/x"}}, wantErr: []string{"overlap"}},
		{name: "dup guest", ms: []Mount{{Location: a, GuestPath: "/g"}, {Location: spaced, GuestPath: "/g"}}, wantErr: []string{`both use mountPoint "/g"`}},
		{name: "guest relative", ms: []Mount{{Location: a, GuestPath: "g"}}, wantErr: []string{"mountPoint \"g\" is relative"}},
		{name: "guest etc", ms: []Mount{{Location: a, GuestPath: "/etc/x"}}, wantErr: []string{"/etc"}},
		{name: "guest covers docker", ms: []Mount{{Location: a, GuestPath: "/var"}}, wantErr: []string{"/var/lib/docker"}},
		{name: "all at once", ms: []Mount{{Location: "rel"}, {Location: filepath.Join(dir, "nope")}}, wantErr: []string{"relative", "does not exist"}},
		{name: "excludes ok", ms: []Mount{{Location: a, Exclude: []string{"node_modules", "web/vendor", ".venv"}}}},
		{name: "exclude leaves the mount", ms: []Mount{{Location: a, Exclude: []string{"../etc"}}}, wantErr: []string{`exclude "../etc" is not accepted`}},
		{name: "exclude absolute", ms: []Mount{{Location: a, Exclude: []string{"/etc"}}}, wantErr: []string{`exclude "/etc" is not accepted`}},
		{name: "exclude unclean", ms: []Mount{{Location: a, Exclude: []string{"a//b", "./x", "."}}}, wantErr: []string{`"a//b"`, `"./x"`, `"."`}},
		{name: "exclude twice", ms: []Mount{{Location: a, Exclude: []string{"vendor", "vendor"}}}, wantErr: []string{"listed twice"}},
		{name: "exclude nested", ms: []Mount{{Location: a, Exclude: []string{"web", "web/vendor"}}}, wantErr: []string{`"web/vendor" is inside exclude "web"`}},
		{name: "sync inside a share", ms: []Mount{{Location: dir, Writable: true}, {Location: a, Writable: true, Mode: ModeSync}}},
		{name: "share inside a sync", ms: []Mount{{Location: dir, Writable: true, Mode: ModeSync}, {Location: a, Writable: true}}, wantErr: []string{"overlap"}},
		{name: "two nested syncs", ms: []Mount{{Location: dir, Writable: true, Mode: ModeSync}, {Location: a, Writable: true, Mode: ModeSync}}, wantErr: []string{"overlap"}},
		{name: "sync read-only", ms: []Mount{{Location: a, Mode: ModeSync}}, wantErr: []string{"a sync mount is two-way"}},
		{name: "sync with a type", ms: []Mount{{Location: a, Writable: true, Mode: ModeSync, Type: "9p"}}, wantErr: []string{`type "9p" applies to share mounts`}},
		{name: "inotify on a sync mount", ms: []Mount{{Location: a, Writable: true, Mode: ModeSync, Inotify: new(bool)}}, wantErr: []string{"inotify applies to share mounts"}},
		{name: "bad mode", ms: []Mount{{Location: a, Mode: "copy"}}, wantErr: []string{`mode "copy" is not accepted; accepted: share, sync`}},
		{name: "too many excludes", ms: []Mount{{Location: a, Exclude: manyExcludes(MaxExcludes + 1)}}, wantErr: []string{"at most 64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(Resolve(tt.ms, dir))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check: no error, want %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestShares(t *testing.T) {
	tests := []struct {
		name        string
		mounts      []Mount
		defaultType string
		want        []Share
	}{
		{name: "none", defaultType: TypeVirtiofs, want: []Share{}},
		{
			name: "own type else the default, in list order", defaultType: Type9p,
			mounts: []Mount{
				{Location: "/a", GuestPath: "/a", Writable: true},
				{Location: "/b", GuestPath: "/b", Type: TypeVirtiofs},
				{Location: "/c", GuestPath: "/c", Type: Type9p},
			},
			want: []Share{
				{Tag: "vmdock0", HostPath: "/a", GuestPath: "/a", Type: Type9p, Inotify: true},
				{Tag: "vmdock1", HostPath: "/b", GuestPath: "/b", ReadOnly: true, Type: TypeVirtiofs, Inotify: true},
				{Tag: "vmdock2", HostPath: "/c", GuestPath: "/c", ReadOnly: true, Type: Type9p, Inotify: true},
			},
		},
		{
			name: "guest path: its own, else the host path", defaultType: TypeVirtiofs,
			mounts: []Mount{{Location: "/src", GuestPath: "/work", Writable: true}, {Location: "/data"}},
			want: []Share{
				{Tag: "vmdock0", HostPath: "/src", GuestPath: "/work", Type: TypeVirtiofs, Inotify: true},
				{Tag: "vmdock1", HostPath: "/data", GuestPath: "/data", ReadOnly: true, Type: TypeVirtiofs, Inotify: true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Shares(tt.mounts, tt.defaultType); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Shares = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// A -V flag and a ~ mount come out of Resolve and Shares as the guest
// sees them.
func TestSharesAfterResolve(t *testing.T) {
	var ms []Mount
	for _, f := range []string{"~/src:/src:rw", "~"} {
		m, err := ParseFlag(f)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	got := Shares(Resolve(ms, "/home/u"), Type9p)
	want := []Share{
		{Tag: "vmdock0", HostPath: "/home/u/src", GuestPath: "/src", Type: Type9p, Inotify: true},
		{Tag: "vmdock1", HostPath: "/home/u", GuestPath: "/home/u", ReadOnly: true, Type: Type9p, Inotify: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Shares = %+v\nwant %+v", got, want)
	}
}

// inotify is on for share mounts unless a mount turns it off.
func TestSharesInotify(t *testing.T) {
	off := false
	sh := Shares([]Mount{{Location: "/a", GuestPath: "/a"}, {Location: "/b", GuestPath: "/b", Inotify: &off}}, "9p")
	if !sh[0].Inotify || sh[1].Inotify {
		t.Fatalf("inotify = %v, %v; want on by default, off when set false", sh[0].Inotify, sh[1].Inotify)
	}
}

func manyExcludes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("d%d", i)
	}
	return out
}

func TestSyncsAndSharesSplit(t *testing.T) {
	ms := []Mount{
		{Location: "/home/u", GuestPath: "/home/u", Writable: true},
		{Location: "/home/u/app", GuestPath: "/home/u/app", Writable: true, Mode: ModeSync, Exclude: []string{"node_modules"}},
		{Location: "/data", GuestPath: "/data", Type: "9p"},
	}
	shares := Shares(ms, "virtiofs")
	if len(shares) != 2 || shares[0].Tag != "vmdock0" || shares[1].Tag != "vmdock2" || shares[1].HostPath != "/data" {
		t.Fatalf("shares = %+v; want the two share mounts, tags by list position", shares)
	}
	syncs := Syncs(ms)
	want := []Sync{{ID: SyncID("/home/u/app"), HostPath: "/home/u/app", GuestPath: "/home/u/app", Exclude: []string{"node_modules"}}}
	if !reflect.DeepEqual(syncs, want) {
		t.Fatalf("syncs = %+v, want %+v", syncs, want)
	}
	if id := SyncID("/home/u/app"); id != SyncID("/home/u/app") || id == SyncID("/home/u/app2") || !regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`).MatchString(id) {
		t.Fatalf("SyncID %q: want stable, distinct per folder, and a valid session id", id)
	}
}
