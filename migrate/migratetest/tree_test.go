package migratetest

import (
	"archive/tar"
	"bytes"
	"testing"
)

// Docker 20.10 writes a folder's tar mode with the C type bits (040755),
// newer engines without (0755): the same folder must read the same.
func TestReadTreeReadsBothModeForms(t *testing.T) {
	read := func(mode int64) FileFacts {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if err := tw.WriteHeader(&tar.Header{Name: "v/", Typeflag: tar.TypeDir, Mode: mode}); err != nil {
			t.Fatal(err)
		}
		tw.Close()
		got, err := ReadTree(&buf)
		if err != nil {
			t.Fatal(err)
		}
		return got["v/"]
	}
	withType, bare := read(0o40755), read(0o755)
	if withType != bare || !bare.Mode.IsDir() || bare.Mode.Perm() != 0o755 {
		t.Errorf("040755 read as %v, 0755 as %v; want one folder mode drwxr-xr-x", withType.Mode, bare.Mode)
	}
}
