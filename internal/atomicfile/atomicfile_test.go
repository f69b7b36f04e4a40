package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFileContentAndMode(t *testing.T) {
	dir := t.TempDir()
	for _, perm := range []os.FileMode{0o600, 0o644, 0o640} {
		p := filepath.Join(dir, "spec.json")
		data := []byte("content " + perm.String())
		if err := WriteFile(p, data, perm); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("content %q, %v; want %q", got, err, data)
		}
		fi, _ := os.Stat(p)
		if fi.Mode().Perm() != perm {
			t.Errorf("mode %v, want %v", fi.Mode().Perm(), perm)
		}
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("folder holds %v, want only spec.json", names)
	}
}

func TestWriteReplacesAtomically(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state.json")
	if err := WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A reader that opened the old file keeps reading all of it: the new
	// content arrives as a new file, not as writes into the old one.
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := WriteFile(p, []byte("new content"), 0o600); err != nil {
		t.Fatal(err)
	}
	old, _ := io.ReadAll(f)
	now, _ := os.ReadFile(p)
	if string(old) != "old" || string(now) != "new content" {
		t.Errorf("open reader saw %q, path holds %q", old, now)
	}
}

func TestConcurrentReadersSeeWholeFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	a, b := bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<20)
	if err := WriteFile(p, a, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 40; i++ {
			if err := WriteFile(p, [][]byte{a, b}[i%2], 0o600); err != nil {
				t.Error(err)
				return
			}
		}
		close(done)
	}()
	reads := 0
	for {
		select {
		case <-done:
			wg.Wait()
			if reads == 0 {
				t.Fatal("no read happened")
			}
			return
		default:
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Fatalf("read %d bytes that are neither version", len(got))
		}
		reads++
	}
}

func TestFailureLeavesOldFileAndNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "vmdock.yaml")
	if err := WriteFile(p, []byte("cpus: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(p, 0o600, func(w io.Writer) error {
		w.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "cpus: 2\n" {
		t.Errorf("failed write changed the file to %q", got)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("folder holds %v after a failed write, want only vmdock.yaml", names)
	}
}

func TestRenameFailureLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "taken")
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "inner"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("x"), 0o600); err == nil {
		t.Fatal("replacing a non-empty folder succeeded")
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("folder holds %v, want only the folder that was in the way", names)
	}
}

func TestMissingFolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gone", "ha.pid")
	err := WriteFile(p, []byte("1\n"), 0o600)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(p)) {
		t.Fatalf("err %v, want one naming %s", err, p)
	}
}

func TestSymlinkIsKept(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "dotfiles-config.json")
	link := filepath.Join(dir, "config.json")
	if err := os.WriteFile(real, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dotfiles-config.json", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte(`{"currentContext":"vmdock"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link replaced by a plain file (%v)", err)
	}
	if got, _ := os.ReadFile(real); string(got) != `{"currentContext":"vmdock"}` {
		t.Errorf("link target holds %q", got)
	}
	// A dangling link gets the file it names, as os.WriteFile would do.
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink("made-later", dangling); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dangling, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "made-later")); string(got) != "x" {
		t.Errorf("dangling link target holds %q", got)
	}
}

func TestCommit(t *testing.T) {
	dir := t.TempDir()
	staging := filepath.Join(dir, "tmp")
	blobs := filepath.Join(dir, "blobs")
	for _, d := range []string{staging, blobs} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(staging, "download-1")
	if err := os.WriteFile(tmp, []byte("verified"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(blobs, "sha256-abc")
	if err := Commit(tmp, dst); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); string(got) != "verified" {
		t.Errorf("committed file holds %q", got)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp file still there: %v", err)
	}
	// A missing temp file is an error naming the destination, and
	// creates nothing.
	err := Commit(filepath.Join(staging, "gone"), filepath.Join(blobs, "sha256-def"))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("sha256-def")) {
		t.Fatalf("commit of a missing file: %v", err)
	}
	if names := entries(t, blobs); len(names) != 1 {
		t.Errorf("blobs holds %v, want only sha256-abc", names)
	}
}

func TestReplaceFileReplacesALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", link); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceFile(link, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(link)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("link after ReplaceFile: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(link); string(b) != "new" {
		t.Errorf("link holds %q", b)
	}
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Errorf("target changed to %q", b)
	}
}
