package resolver

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type fake struct{ calls []string }

// run records each command and does what install and rm would to the
// test's folder, so a second run sees the first one's file.
func (f *fake) run(_ context.Context, sudo bool, argv ...string) error {
	line := strings.Join(argv, " ")
	if sudo {
		line = "sudo " + line
	}
	f.calls = append(f.calls, line)
	switch argv[0] {
	case "mkdir":
		return os.MkdirAll(argv[2], 0o755)
	case "install":
		b, err := os.ReadFile(argv[3])
		if err != nil {
			return err
		}
		return os.WriteFile(argv[4], b, 0o644)
	case "rm":
		return os.Remove(argv[2])
	}
	return nil
}

func setup(t *testing.T) (*Resolver, *fake, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "resolver")
	f := &fake{}
	return &Resolver{Port: 15353, Out: &bytes.Buffer{}, Run: f.run, Getenv: func(k string) string {
		if k == DirEnv {
			return dir
		}
		return ""
	}}, f, filepath.Join(dir, "vmdock.localhost")
}

func TestDarwinAddAndRemove(t *testing.T) {
	r, f, path := setup(t)
	if err := darwinAdd(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 2 || f.calls[0] != "sudo mkdir -p "+filepath.Dir(path) || !strings.HasPrefix(f.calls[1], "sudo install -m 0644 ") || !strings.HasSuffix(f.calls[1], " "+path) {
		t.Errorf("commands %q", f.calls)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "\nnameserver 127.0.0.1\nport 15353\n") {
		t.Errorf("resolver file:\n%s", b)
	}
	f.calls = nil
	if err := darwinAdd(context.Background(), r); err != nil || len(f.calls) != 0 {
		t.Errorf("a second add: %v %q, want nothing run", err, f.calls)
	}
	r.Root = true
	if err := darwinRemove(context.Background(), r); err != nil || len(f.calls) != 1 || f.calls[0] != "rm -f "+path {
		t.Errorf("remove: %v %q", err, f.calls)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("the file is still there")
	}
}

func TestDarwinLeavesOthersFilesAlone(t *testing.T) {
	r, f, path := setup(t)
	os.MkdirAll(filepath.Dir(path), 0o755)                     //nolint:errcheck
	os.WriteFile(path, []byte("nameserver 10.0.0.1\n"), 0o644) //nolint:errcheck
	if err := darwinAdd(context.Background(), r); err == nil || !strings.Contains(err.Error(), "vmdock did not write it") {
		t.Errorf("add over another's file: %v", err)
	}
	if err := darwinRemove(context.Background(), r); err == nil || !strings.Contains(err.Error(), "not written by vmdock") {
		t.Errorf("remove of another's file: %v", err)
	}
	if len(f.calls) != 0 {
		t.Errorf("ran %q", f.calls)
	}
	r.Port = 0
	os.Remove(path)
	if err := darwinAdd(context.Background(), r); err == nil || !strings.Contains(err.Error(), "domains.dnsPort 0") {
		t.Errorf("add with the responder off: %v", err)
	}
}

func TestLinuxExplains(t *testing.T) {
	r, f, _ := setup(t)
	if err := linux(context.Background(), r); err == nil || !strings.Contains(err.Error(), "nss-myhostname") || len(f.calls) != 0 {
		t.Errorf("linux: %v %q", err, f.calls)
	}
}
