package instance

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/store"
)

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// madeByVMDock is a folder as vmdock and QEMU leave it, temp files and
// rotated logs included.
var madeByVMDock = []string{
	"vmdock.yaml", "lock", "disk.raw", "data.raw", "boot.iso", "ha.pid", "state.json", "spec.json",
	"serial.log", "serial.log.1", "hostagent.log", "hostagent.log.1", "guestagent.log", "broken",
	"image.digest", "qemu.log", "qemu.pid", "efi-vars.fd", "virtiofsd-0.pid", "virtiofs-1.sock",
	".vmdock.yaml.12345", ".boot-999.iso", "state.json.tmp", "disk.raw.tmp",
}

func deleteEnv(t *testing.T) string {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	return t.TempDir()
}

func TestDeleteRemovesOnlyVMDockFiles(t *testing.T) {
	home := deleteEnv(t)
	inst, _ := store.Open(home, "x")
	inst.Create()
	touch(t, inst.Dir, madeByVMDock...)
	touch(t, inst.Dir, "notes.txt", "disk.raw.bak")
	os.Mkdir(filepath.Join(inst.Dir, "photos"), 0o700)
	var out bytes.Buffer
	if err := Delete(context.Background(), inst, DeleteOptions{Data: true, Progress: &out}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listDir(t, inst.Dir), " "); got != "disk.raw.bak notes.txt photos" {
		t.Fatalf("left %q, want only the files vmdock did not make", got)
	}
	if !strings.Contains(out.String(), "kept "+inst.Dir) || !strings.Contains(out.String(), "notes.txt") {
		t.Fatalf("delete said %q, want it to name the folder kept and why", out.String())
	}
}

func TestDeleteData(t *testing.T) {
	home := deleteEnv(t)
	inst, _ := store.Open(home, "x")
	inst.Create()
	touch(t, inst.Dir, madeByVMDock...)
	if err := Delete(context.Background(), inst, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listDir(t, inst.Dir), " "); got != "data.raw lock" {
		t.Fatalf("plain delete left %q, want the data disk and lock", got)
	}
	var out bytes.Buffer
	if err := Delete(context.Background(), inst, DeleteOptions{Data: true, Progress: &out}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(inst.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("delete --data of a folder of vmdock's files kept it: %v (%s)", err, out.String())
	}
}

func TestDeleteRefusesSymlinkedFolder(t *testing.T) {
	home := deleteEnv(t)
	target := t.TempDir()
	touch(t, target, "vmdock.yaml", "data.raw", "thesis.tex")
	if err := os.Symlink(target, filepath.Join(home, "x")); err != nil {
		t.Fatal(err)
	}
	inst, _ := store.Open(home, "x")
	before := listDir(t, target)
	err := Delete(context.Background(), inst, DeleteOptions{Data: true, Force: true})
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("delete through a symlink: %v; want a one-line refusal", err)
	}
	if after := listDir(t, target); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Fatalf("link target changed: %v -> %v", before, after)
	}
	if fi, err := os.Lstat(inst.Dir); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link itself changed: %v", err)
	}
}

func TestIsInstanceFile(t *testing.T) {
	for _, n := range madeByVMDock {
		if !store.IsInstanceFile(n) {
			t.Errorf("%s: not recognised as vmdock's", n)
		}
	}
	for _, n := range []string{"notes.txt", "disk.raw.bak", "vmdock.yaml~", "serial.log.2", "data.raw.1", ".bashrc", "virtiofsd-0.pid.old"} {
		if store.IsInstanceFile(n) {
			t.Errorf("%s: taken for vmdock's", n)
		}
	}
}
