package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeModule lays out a throwaway module that uses the real vz API.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	// vz and its channel module at this repository's versions; x/mod at
	// the version vz itself asks for, whose sums are pinned here because
	// this repository's go.sum follows a newer x/mod (Mutagen's).
	files["go.mod"] = `module example.com/darwinbad

go 1.26

require (
	github.com/Code-Hex/vz/v3 ` + repoVersion(t, "github.com/Code-Hex/vz/v3") + `
	github.com/Code-Hex/go-infinity-channel ` + repoVersion(t, "github.com/Code-Hex/go-infinity-channel") + ` // indirect
	golang.org/x/mod v0.22.0 // indirect
)
`
	files["go.sum"] = goSumLines(t, "github.com/Code-Hex/vz/v3 ", "github.com/Code-Hex/go-infinity-channel ") + xmodSums
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// xmodSums are the go.sum lines of golang.org/x/mod v0.22.0, the version
// vz v3.7.1 requires.
const xmodSums = `golang.org/x/mod v0.22.0 h1:D4nJWe9zXqHOmWqj4VMOJhvzj7bEZg4wEYa759z1pH4=
golang.org/x/mod v0.22.0/go.mod h1:6SkKJ3Xj0I0BrPOZoBy3bdMptDDU9oJrpohJ3eWZ1fY=
`

// repoVersion is the version of module mod that this repository's go.mod
// requires.
func repoVersion(t *testing.T, mod string) string {
	t.Helper()
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "require "))
		if len(f) >= 2 && f[0] == mod {
			return f[1]
		}
	}
	t.Fatalf("go.mod does not require %s", mod)
	return ""
}

// goSumLines copies this repository's go.sum lines for the given module
// prefixes, so the throwaway module's downloads are verified the same way.
func goSumLines(t *testing.T, prefixes ...string) string {
	t.Helper()
	b, err := os.ReadFile("../../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, l := range strings.SplitAfter(string(b), "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out.WriteString(l)
			}
		}
	}
	return out.String()
}

var badModule = map[string]string{
	// Wrong argument type: NewLinuxBootLoader takes the kernel path.
	"bad/boot_darwin.go": `//go:build darwin

package bad

import vz "github.com/Code-Hex/vz/v3"

func Boot() { _, _ = vz.NewLinuxBootLoader(42) }
`,
	// Rosetta exists only in vz's arm64 files: fine on arm64, an error on amd64.
	"bad/rosetta_darwin.go": `//go:build darwin

package bad

import vz "github.com/Code-Hex/vz/v3"

func Rosetta() { _, _ = vz.NewLinuxRosettaDirectoryShare() }
`,
	"bad/bad.go": "package bad\n",
	// No darwin-only files: must not be checked even though it would fail.
	"portable/p.go": "package portable\n\nvar X int = \"not an int\"\n",
}

func TestCheckReportsVzMisuse(t *testing.T) {
	checkReportsVzMisuse(t)
}

// On an empty module cache Check fetches what the darwin build needs
// itself. The modules come from a file:// proxy made of this machine's
// module cache, so the test needs no network.
func TestCheckFreshModuleCache(t *testing.T) {
	cache, err := goEnv("GOMODCACHE")
	if err != nil {
		t.Fatal(err)
	}
	proxy := filepath.Join(cache, "cache", "download")
	if _, err := os.Stat(filepath.Join(proxy, "github.com", "!code-!hex", "vz", "v3", "@v", "v3.7.1.zip")); err != nil {
		t.Skipf("no vz v3.7.1 download in the module cache to serve as a proxy: %v", err)
	}
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOPROXY", "file://"+filepath.ToSlash(proxy))
	t.Setenv("GOFLAGS", "-modcacherw") // so the test's temp folder can be removed
	checkReportsVzMisuse(t)
}

func checkReportsVzMisuse(t *testing.T) {
	dir := writeModule(t, badModule)
	res, err := Check(Options{ModuleDir: dir, Arches: []string{"arm64", "amd64"}})
	if err != nil {
		t.Fatal(err)
	}
	var checked []string
	for _, c := range res.Checked {
		checked = append(checked, c.Arch+" "+c.Dir+" "+strings.Join(c.DarwinOnly, ","))
	}
	wantChecked := []string{"arm64 bad boot_darwin.go,rosetta_darwin.go", "amd64 bad boot_darwin.go,rosetta_darwin.go"}
	if !reflect.DeepEqual(checked, wantChecked) {
		t.Errorf("checked %q, want %q", checked, wantChecked)
	}

	got := map[string]bool{}
	for _, p := range res.Problems {
		got[p.Arch+" "+p.Pos] = true
		t.Log(p)
	}
	bootPos := filepath.Join("bad", "boot_darwin.go") + ":7:44"
	rosettaPos := filepath.Join("bad", "rosetta_darwin.go") + ":7:28"
	for _, want := range []string{"arm64 " + bootPos, "amd64 " + bootPos, "amd64 " + rosettaPos} {
		if !got[want] {
			t.Errorf("no problem reported at %s", want)
		}
	}
	if got["arm64 "+rosettaPos] {
		t.Errorf("Rosetta call reported on arm64, where vz has it")
	}
	if len(res.Problems) != 3 {
		t.Errorf("got %d problems, want 3", len(res.Problems))
	}
}

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"bad module fails", []string{"-C", writeModule(t, badModule), "-skip-build"}, 1, "cannot use 42"},
		{"real vm/vz passes", []string{"-C", "../..", "-pkg", "vm/vz", "-skip-build"}, 0, "checked darwin/amd64 vm/vz"},
		{"bad arch", []string{"-arch", "ppc64", "-skip-build"}, 2, ""},
		{"missing pkg dir", []string{"-C", "../..", "-pkg", "no/such", "-skip-build"}, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tt.args, &out, &errOut)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantOut, out.String())
			}
		})
	}
}

func TestParseGoMod(t *testing.T) {
	dir := t.TempDir()
	gomod := `module example.com/m // main

go 1.26

require github.com/A/b v1.2.3
require (
	golang.org/x/sys v0.50.0 // indirect
)
replace github.com/A/b => ../b
replace golang.org/x/sys v0.50.0 => golang.org/x/sys v0.49.0
`
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	mf, err := parseGoMod(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := &modFile{
		Path:     "example.com/m",
		Requires: map[string]string{"github.com/A/b": "v1.2.3", "golang.org/x/sys": "v0.50.0"},
		Replaces: map[string]string{"github.com/A/b": filepath.Join(dir, "../b"), "golang.org/x/sys": "golang.org/x/sys@v0.49.0"},
	}
	if !reflect.DeepEqual(mf, want) {
		t.Errorf("parseGoMod = %+v, want %+v", mf, want)
	}
}

func TestResolve(t *testing.T) {
	r := &resolver{
		goroot: "/go", modCache: "/cache", mainDir: "/src/m",
		mod: &modFile{Path: "example.com/m", Requires: map[string]string{
			"github.com/Code-Hex/vz/v3": "v3.7.1", "github.com/Code-Hex/vz": "v1.0.0",
		}},
	}
	tests := []struct {
		path, wantDir string
		wantErr       bool
	}{
		{"fmt", "/go/src/fmt", false},
		{"example.com/m/vm/vz", "/src/m/vm/vz", false},
		{"github.com/Code-Hex/vz/v3/internal/objc", "/cache/github.com/!code-!hex/vz/v3@v3.7.1/internal/objc", false},
		{"example.com/other", "", true},
	}
	for _, tt := range tests {
		dir, _, err := r.resolve(tt.path, false)
		if (err != nil) != tt.wantErr || dir != filepath.FromSlash(tt.wantDir) {
			t.Errorf("resolve(%q) = %q, %v; want %q (error %v)", tt.path, dir, err, tt.wantDir, tt.wantErr)
		}
	}
}

// A table entry whose value parts from vz's constant (the swap a reviewer
// misses) is a problem on every arch; matching ones are not.
func TestCheckConstants(t *testing.T) {
	dir := writeModule(t, map[string]string{
		"ok/ok_darwin.go": "//go:build darwin\n\npackage ok\n\nimport vz \"github.com/Code-Hex/vz/v3\"\n\nvar M = vz.DiskImageSynchronizationModeFull\n",
		"ok/ok.go":        "package ok\n",
	})
	const vzPkg = "github.com/Code-Hex/vz/v3"
	res, err := Check(Options{ModuleDir: dir, Arches: []string{"arm64", "amd64"}, Constants: []Constant{
		{Pkg: vzPkg, Name: "DiskImageSynchronizationModeFull", Value: 1},
		{Pkg: vzPkg, Name: "DiskImageSynchronizationModeNone", Value: 1}, // swapped: None is 3
		{Pkg: vzPkg, Name: "DiskImageSynchronizationModeSometimes", Value: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, p := range res.Problems {
		got[p.Arch+" "+p.Pos] = true
		t.Log(p)
	}
	for _, arch := range []string{"arm64", "amd64"} {
		for _, name := range []string{"DiskImageSynchronizationModeNone", "DiskImageSynchronizationModeSometimes"} {
			if !got[arch+" "+vzPkg+"."+name] {
				t.Errorf("%s: no problem for %s", arch, name)
			}
		}
		if got[arch+" "+vzPkg+".DiskImageSynchronizationModeFull"] {
			t.Errorf("%s: the correct Full entry was reported", arch)
		}
	}
	if len(res.Problems) != 4 {
		t.Errorf("got %d problems, want 4", len(res.Problems))
	}
}

func TestOurConstantsCoverVZTables(t *testing.T) {
	consts, err := ourConstants("../..")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, c := range consts {
		names[c.Name] = true
	}
	for _, want := range []string{"DiskImageSynchronizationModeFull", "DiskImageSynchronizationModeFsync", "DiskImageSynchronizationModeNone", "DiskImageCachingModeCached"} {
		if !names[want] {
			t.Errorf("ourConstants lacks %s", want)
		}
	}
	if other, err := ourConstants(writeModule(t, map[string]string{"x/x.go": "package x\n"})); err != nil || other != nil {
		t.Errorf("another module got constants %v (err %v)", other, err)
	}
}
