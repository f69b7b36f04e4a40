package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/layout"
)

// copyFixture puts vm/layout's instance folder of format n under home as
// profile default.
func copyFixture(t *testing.T, home string, n int) string {
	t.Helper()
	src := filepath.Join("..", "..", "vm", "layout", "testdata", fmt.Sprintf("format%d", n), "default")
	dst := filepath.Join(home, "default")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// status --json shows an older folder's format until a command that takes
// the lock migrates it, then the current one and who recorded it.
func TestStatusShowsTheFolderFormat(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	copyFixture(t, home, layout.FormatNoRuntime)
	format := func() (int, string) {
		out, _ := run("status", "--json")
		var s struct {
			Format          int    `json:"format"`
			FormatWrittenBy string `json:"formatWrittenBy"`
		}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		return s.Format, s.FormatWrittenBy
	}
	if f, by := format(); f != layout.FormatNoRuntime || by != "" {
		t.Errorf("before: format %d by %q, want %d by nobody", f, by, layout.FormatNoRuntime)
	}
	if _, err := run("stop"); err != nil {
		t.Fatal(err)
	}
	if f, by := format(); f != layout.Current || by != "dev" {
		t.Errorf("after stop: format %d by %q, want %d by dev", f, by, layout.Current)
	}
	if out, _ := run("version"); !strings.Contains(out, fmt.Sprintf("instance folder format: %d", layout.Current)) {
		t.Errorf("version does not show the format:\n%s", out)
	}
}

// Every command refuses a folder a newer vmdock made, in one line naming
// that vmdock, and changes nothing in it.
func TestCommandsRefuseANewerFolder(t *testing.T) {
	home, _ := env(t)
	f := installFake(t)
	dir := copyFixture(t, home, layout.FormatUnversioned)
	if err := os.WriteFile(filepath.Join(dir, "format"), []byte(`{"format":99,"writtenBy":"v3.1.0"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, dir)
	for _, args := range [][]string{{"start"}, {"start", "--cpus", "3"}, {"stop"}, {"status", "--json"}, {"delete"}} {
		_, err := run(args...)
		if err == nil || !strings.Contains(err.Error(), "made by vmdock v3.1.0, upgrade") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v; want one line: made by vmdock v3.1.0, upgrade", args, err)
		}
	}
	if treeHash(t, dir) != before {
		t.Error("a refused command changed the newer folder")
	}
	if len(f.starts)+len(f.stops) != 0 {
		t.Errorf("the VM was started %d and stopped %d times", len(f.starts), len(f.stops))
	}
}
