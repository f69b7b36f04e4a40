package images

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func TestPruneKeepsWhatInstancesUse(t *testing.T) {
	files := map[string][]byte{"/a": rawDisk("image a"), "/b": rawDisk("image b"), "/c": rawDisk("image c")}
	srv := newServer(t, files, nil)
	cacheDir := t.TempDir()
	for _, p := range []string{"/a", "/b", "/c"} {
		if _, err := Import(context.Background(), srv.URL+p, "amd64", Options{CacheDir: cacheDir, Name: "img" + p[1:]}); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(home, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("started/vmdock.yaml", "image: imgc\n")
	write("started/"+DigestFileName, sha256Of(files["/a"])+"\n") // the digest wins over the name
	write("fresh/vmdock.yaml", "cpus: 2\nimage: imgb\n")
	write("notaninstance/readme", "x")

	used, err := UsedBy(home)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := OpenCache(cacheDir)
	removed, err := c.Prune(used)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Name != "imgc" {
		t.Errorf("removed %+v, want only imgc", removed)
	}
	left, _ := c.Entries()
	var names []string
	for _, e := range left {
		names = append(names, e.Name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "imga,imgb" {
		t.Errorf("left %v, want imga,imgb", names)
	}
}

func TestFindAndImportedName(t *testing.T) {
	body := rawDisk("named image")
	srv := newServer(t, map[string][]byte{"/x": body}, nil)
	cacheDir := t.TempDir()
	e, err := Import(context.Background(), srv.URL+"/x", "amd64", Options{CacheDir: cacheDir, Name: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	// The imported name resolves from the cache, without the server.
	srv.Config.Handler = http.NotFoundHandler()
	img, err := Ensure(context.Background(), "mine", "amd64", Options{CacheDir: cacheDir})
	if err != nil || img.Digest != e.Digest {
		t.Fatalf("Ensure(mine) = %+v, %v", img, err)
	}
	c, _ := OpenCache(cacheDir)
	hexPart := strings.TrimPrefix(e.Digest, "sha256:")
	tests := []struct {
		q    string
		want int
	}{
		{"mine", 1}, {e.Digest, 1}, {hexPart[:12], 1}, {"sha256:" + hexPart[:12], 1},
		{"sha512:" + hexPart[:12], 0}, {hexPart[:4], 0}, {"other", 0}, {srv.URL + "/x", 1},
	}
	for _, tt := range tests {
		got, err := c.Find(tt.q)
		if err != nil || len(got) != tt.want {
			t.Errorf("Find(%q) = %d entries, %v; want %d", tt.q, len(got), err, tt.want)
		}
	}
}
