package cidata

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/kdomanski/iso9660"
)

func TestWriteRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boot.iso")
	want := map[string][]byte{
		"vmdock-agent": []byte("\x7fELF fake agent"),
		"agent.json":   []byte(`{"channel":"virtio-serial"}`),
		"user-data":    []byte("#cloud-config\n"),
	}
	if err := Write(path, want); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := iso9660.OpenImage(f)
	if err != nil {
		t.Fatal(err)
	}
	label, err := img.Label()
	if err != nil || label != Label {
		t.Fatalf("label = %q, %v; want %q", label, err, Label)
	}
	root, err := img.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	children, err := root.GetChildren()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range children {
		b, err := io.ReadAll(c.Reader())
		if err != nil {
			t.Fatal(err)
		}
		got[c.Name()] = string(b)
	}
	for name, content := range want {
		if got[name] != string(content) {
			t.Errorf("file %q = %q, want %q (all: %v)", name, got[name], content, got)
		}
	}
}
