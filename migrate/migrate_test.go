package migrate

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveSource(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "docker.sock")
	if err := os.WriteFile(own, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(own, link); err != nil {
		t.Fatal(err)
	}
	contexts := map[string]string{"colima": "unix:///home/u/.colima/docker.sock", "remote": "ssh://me@box", "tcpctx": "tcp://10.0.0.1:2376", "mine": "unix://" + own}
	endpoint := func(name string) (string, error) {
		if h, ok := contexts[name]; ok {
			return h, nil
		}
		return "", errors.New(`docker context "` + name + `" does not exist`)
	}
	good := map[string]string{"colima": "/home/u/.colima/docker.sock", "unix:///run/other.sock": "/run/other.sock"}
	for from, want := range good {
		if got, err := ResolveSource(from, endpoint, "vmdock", own); err != nil || got != want {
			t.Errorf("ResolveSource(%q) = %q, %v; want %q", from, got, err, want)
		}
	}
	bad := map[string]string{
		"":                   "--from is required",
		"nosuch":             `"nosuch" does not exist`,
		"vmdock":             "own docker context",
		"remote":             "ssh:// engines are not supported yet",
		"tcpctx":             "tcp:// engines are not supported yet",
		"tcp://1.2.3.4:2375": "tcp:// engines are not supported yet",
		"ssh://me@box":       "ssh:// engines are not supported yet",
		"unix://relative":    "absolute socket path",
		"mine":               "own docker socket",
		"unix://" + link:     "own docker socket",
	}
	for from, want := range bad {
		_, err := ResolveSource(from, endpoint, "vmdock", own)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ResolveSource(%q) = %v; want one line with %q", from, err, want)
		}
	}
}

func TestCheckTarget(t *testing.T) {
	if err := CheckTarget("default", "docker", true); err != nil {
		t.Errorf("running docker instance refused: %v", err)
	}
	if err := CheckTarget("dev", "docker", false); err == nil || !strings.Contains(err.Error(), `"dev" is not running`) {
		t.Errorf("stopped instance: %v", err)
	}
	if err := CheckTarget("ctr", "containerd", true); err == nil || !strings.Contains(err.Error(), "containerd runtime") {
		t.Errorf("containerd instance: %v", err)
	}
}

func TestSameImageAcrossStores(t *testing.T) {
	layers := []string{"sha256:aaa", "sha256:bbb"}
	classic := imageInspect{ID: "sha256:config1"}
	classic.RootFS.Layers = layers
	// Under the containerd store the ID is the index digest.
	desktop := imageInspect{ID: "sha256:index9"}
	desktop.RootFS.Layers = layers

	if !sameImage(identityOf(desktop, true, "sha256:config1"), identityOf(classic, false, "")) {
		t.Error("a containerd-store image whose export names config1 should equal the classic image config1")
	}
	if sameImage(identityOf(desktop, false, ""), identityOf(classic, false, "")) {
		t.Error("IDs that differ on classic stores are different images")
	}
	if sameImage(identityOf(desktop, true, "sha256:config2"), identityOf(classic, false, "")) {
		t.Error("different config digests are different images")
	}
	other := classic
	other.RootFS.Layers = []string{"sha256:aaa"}
	if sameImage(identityOf(desktop, true, ""), identityOf(other, false, "")) {
		t.Error("different diff IDs are different images")
	}
	if !sameImage(identityOf(desktop, true, ""), identityOf(classic, false, "")) {
		t.Error("before the export only diff IDs can be compared for a containerd-store source")
	}
}

// exportTar is a `docker save` archive of files, in the order given.
func exportTar(t *testing.T, files [][2]string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1]))}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(f[1]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFilterExportConfigs(t *testing.T) {
	archive := exportTar(t, [][2]string{
		{"blobs/sha256/abc", "{}"},
		{"manifest.json", `[{"Config":"blobs/sha256/abc","RepoTags":["a:1","a:2"]},{"Config":"def.json","RepoTags":["b:1"]}]`},
	})
	m := filterExport(bytes.NewReader(archive), io.Discard, []string{"a:2", "b:1"})
	if m.err != nil || m.configFor("a:2") != "sha256:abc" || m.configFor("b:1") != "sha256:def" || m.configFor("a:1") != "" {
		t.Errorf("filterExport = %+v", m)
	}
}

func TestBindSources(t *testing.T) {
	hc := map[string]any{
		"Binds":  []any{"named:/data", "/Users/me/src:/src:ro", "/tmp/x:/x"},
		"Mounts": []any{map[string]any{"Type": "bind", "Source": "/opt/y"}, map[string]any{"Type": "volume", "Source": "v"}},
	}
	got := strings.Join(bindSources(hc), " ")
	if got != "/Users/me/src /tmp/x /opt/y" {
		t.Errorf("bindSources = %q", got)
	}
}

func TestSubnetsClash(t *testing.T) {
	taken := []netip.Prefix{netip.MustParsePrefix("172.17.0.0/16")}
	if !subnetsClash([]map[string]string{{"Subnet": "172.17.5.0/24"}}, taken) {
		t.Error("overlapping subnet not seen")
	}
	if subnetsClash([]map[string]string{{"Subnet": "10.9.0.0/24"}}, taken) {
		t.Error("free subnet seen as taken")
	}
}

func TestRecordMarksUnfinishedAndCopied(t *testing.T) {
	path := filepath.Join(t.TempDir(), "migrate.json")
	r, err := loadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.start("v", "T1"); err != nil {
		t.Fatal(err)
	}
	again, _ := loadRecord(path)
	if !again.unfinished("v", "T1") || again.unfinished("v", "T2") || again.copied("v", "T1") {
		t.Errorf("after start: %+v", again)
	}
	if err := again.finish("v", "T1"); err != nil {
		t.Fatal(err)
	}
	done, _ := loadRecord(path)
	if done.unfinished("v", "T1") || !done.copied("v", "T1") || done.copied("v", "T2") {
		t.Errorf("after finish: %+v", done)
	}
}

// TestOlderRecordNeverReplaces: an older record's plain names have no
// creation time, so an unfinished one matches no volume.
func TestOlderRecordNeverReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "migrate.json")
	if err := os.WriteFile(path, []byte(`{"unfinished":["u"],"copied":["c"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := loadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.unfinished("u", "") || r.unfinished("u", "2026-01-01T00:00:00Z") || !r.copied("c", "2026-01-01T00:00:00Z") {
		t.Errorf("older record read as %+v", r)
	}
}

func TestSourceNotAnswering(t *testing.T) {
	e := NewEngine(filepath.Join(t.TempDir(), "none.sock"))
	err := e.Ping(context.Background())
	if err == nil || !strings.Contains(err.Error(), "none.sock") {
		t.Errorf("Ping on a missing socket = %v; want an error naming the socket", err)
	}
}

func findItem(rep Report, kind, name string) Item {
	for _, it := range rep.Items {
		if it.Kind == kind && it.Name == name {
			return it
		}
	}
	return Item{}
}
