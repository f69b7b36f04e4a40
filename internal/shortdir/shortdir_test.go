package shortdir

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A macOS-length TMPDIR must not lengthen the folder, and a socket binds
// in it with room for a file name.
func TestNewIgnoresTMPDIR(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("x", 60))
	if err := os.MkdirAll(long, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long)
	dir := New(t)
	if strings.HasPrefix(dir, long) || len(dir) > 24 {
		t.Fatalf("New under TMPDIR=%s: %s (%d bytes), want a folder under /tmp", long, dir, len(dir))
	}
	l, err := net.Listen("unix", filepath.Join(dir, "a-socket-with-a-long-name.sock"))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

func TestNewRemovedAtCleanup(t *testing.T) {
	var dir string
	t.Run("inner", func(t *testing.T) {
		dir = New(t)
		ro := filepath.Join(dir, "ro", "sub")
		if err := os.MkdirAll(ro, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(ro), 0o500); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s after its test ended: %v, want it gone", dir, err)
	}
}
