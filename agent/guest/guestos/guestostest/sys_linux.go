package guestostest

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/internal/shortdir"
)

// NewSys is a guest system under a temp root with /etc and a mount table
// holding only the root file system, on a FakeOS.
func NewSys(t *testing.T) (guestos.Sys, *FakeOS) {
	t.Helper()
	fos := &FakeOS{}
	// Short: sockets made under it must fit a socket address.
	root := shortdir.New(t)
	for _, d := range []string{"proc/self", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "proc/self/mountinfo"),
		[]byte("22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return guestos.Sys{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), OS: fos, Root: root}, fos
}
