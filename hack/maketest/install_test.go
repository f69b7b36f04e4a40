package maketest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// checkout is a temp folder holding a copy of the Makefile and nothing
// else: a target that tried to build would fail there.
func checkout(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runMake(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-C", dir, "--no-print-directory"}, args...)...)
	// GO points at a program that fails loudly: install must not run it.
	cmd.Env = append(os.Environ(), "GO=false-go-was-run")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func TestInstallCopiesTheBuiltBinaryWithoutBuilding(t *testing.T) {
	dir := checkout(t)
	plan, err := runMake(t, dir, "-n", "install", "DESTDIR="+filepath.Join(dir, "dest"))
	if err != nil {
		t.Fatalf("make -n install: %v\n%s", err, plan)
	}
	for _, builds := range []string{"false-go-was-run", "codesign", "go build"} {
		if strings.Contains(plan, builds) {
			t.Errorf("make -n install runs %q:\n%s", builds, plan)
		}
	}

	bin := []byte("#!/bin/sh\necho built by make build\n")
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "vmdock"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "dest")
	if out, err := runMake(t, dir, "install", "DESTDIR="+dest, "PREFIX=/opt/vm"); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	installed := filepath.Join(dest, "opt", "vm", "bin", "vmdock")
	got, err := os.ReadFile(installed)
	if err != nil || !bytes.Equal(got, bin) {
		t.Fatalf("installed %s = %q, %v; want bin/vmdock as it was", installed, got, err)
	}
	if fi, _ := os.Stat(installed); fi.Mode().Perm() != 0o755 {
		t.Errorf("installed mode = %v, want 0755", fi.Mode().Perm())
	}
}

func TestInstallWithoutABuildSaysWhatToRun(t *testing.T) {
	dir := checkout(t)
	dest := filepath.Join(dir, "dest")
	out, err := runMake(t, dir, "install", "DESTDIR="+dest)
	if err == nil {
		t.Fatalf("make install without bin/vmdock succeeded:\n%s", out)
	}
	if !strings.Contains(out, "bin/vmdock is missing: run `make build` first") {
		t.Errorf("make install says:\n%s\nwant it to say bin/vmdock is missing and to run make build", out)
	}
	if strings.Contains(out, "false-go-was-run") {
		t.Errorf("make install tried to build:\n%s", out)
	}
	if _, err := os.Stat(dest); err == nil {
		t.Errorf("a failed install created %s", dest)
	}
}
