//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/migrate/migratetest"
)

// migrateEngineDir is the e2e source engine's folder: not the migrate
// tests' own, since CI may run those beside this test.
const migrateEngineDir = "/tmp/vmdock-migrate-e2e"

// migrateBlobs is how many 1 MiB files the source volume holds.
const migrateBlobs = 4

// migrateJSONReport is what the check reads of `vmdock migrate --json`.
type migrateJSONReport struct {
	Items []struct {
		Kind, Name, Result, Detail string
		Bytes                      int64
	}
	Copied, Failed int
}

// checkMigrate starts a dockerd on the host as migrate's tests do, fills
// it, and runs `vmdock migrate` from it into the running instance: the
// images, the volume's files and the container arrive equal, the
// container starts and serves its port on the host, the source is left as
// it was, and a second run copies nothing. What it brought is removed
// again, so the checks after it see the instance as before.
func checkMigrate(t *testing.T, e *env) {
	e.timed("vmdock migrate from a host dockerd: images, a volume and a container arrive equal and the container serves its port", func(t *testing.T) {
		began := time.Now()
		defer func() { t.Logf("the migrate check took %.1f s", time.Since(began).Seconds()) }()
		if runtime.GOARCH != "amd64" {
			t.Skipf("the source image holds this host's busybox (%s), the instance is amd64", runtime.GOARCH)
		}
		engines, err := migratetest.Start(migrateEngineDir, "vmdock-migrate-e2e", "src")
		if err != nil {
			t.Fatalf("source dockerd: %v", err)
		}
		defer engines.Stop()
		from := "unix://" + engines.List[0].Socket
		src := func(args ...string) string {
			t.Helper()
			return e.run(2*time.Minute, "docker", append([]string{"-H", from}, args...)...)
		}
		fillMigrateSource(t, e, from, src)
		defer e.try(time.Minute, "docker", "--context", "vmdock", "rm", "-f", "migweb")
		before := migrateLists(src)

		first := e.runMigrate(t, from)
		checkMigrateItems(t, first)
		for _, tag := range []string{"mig/e2e:1", "mig/e2e:latest"} {
			const f = "{{.Id}} {{json .RootFS.Layers}}"
			if a, b := src("image", "inspect", "-f", f, tag), e.docker(time.Minute, "image", "inspect", "-f", f, tag); a != b {
				t.Errorf("image %s: source %s, instance %s (config digest, diff IDs)", tag, a, b)
			}
		}
		checkMigratedVolume(t, e, src)
		checkMigratedContainer(t, e, src)
		e.docker(time.Minute, "start", "migweb")
		waitForTestServer(t, migrateWebPort, time.Minute)

		second := e.runMigrate(t, from)
		if second.Copied != 0 || second.Failed != 0 {
			t.Errorf("the second run copied %d and failed %d items, want none: %+v", second.Copied, second.Failed, second.Items)
		}
		if after := migrateLists(src); !reflect.DeepEqual(before, after) {
			t.Errorf("the source changed:\nbefore %v\nafter  %v", before, after)
		}
		e.docker(time.Minute, "rm", "-f", "migweb")
		e.docker(time.Minute, "volume", "rm", "migvol")
		e.docker(time.Minute, "network", "rm", "migratenet")
		e.docker(time.Minute, "rmi", "mig/e2e:1", "mig/e2e:latest")
	})
}

// fillMigrateSource gives the source an image imported from
// busybox-static with two tags, a volume with a few MB (a symlink, a 0600
// file of uid 1234, an empty folder), a network and a stopped container
// with env, labels, a published port and a restart policy.
func fillMigrateSource(t *testing.T, e *env, from string, src func(...string) string) {
	t.Helper()
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("busybox-static (hack/deps.sh) makes the source image: %v", err)
	}
	dir := t.TempDir()
	image, err := migratetest.ImageTar(map[string][]byte{"bin/busybox": busybox, "bin/sh": busybox, "www/index.html": []byte("vmdock-test-ok\n")})
	must(t, err)
	imageTar := filepath.Join(dir, "image.tar")
	must(t, os.WriteFile(imageTar, image, 0o600))
	src("import", imageTar, "mig/e2e:1")
	src("tag", "mig/e2e:1", "mig/e2e:latest")

	src("volume", "create", "--label", "owner=e2e", "migvol")
	var tree bytes.Buffer
	must(t, migratetest.WriteVolumeTree(&tree, "v", migrateBlobs, 1<<20))
	treeTar := filepath.Join(dir, "volume.tar")
	must(t, os.WriteFile(treeTar, tree.Bytes(), 0o600))
	src("create", "--name", "migfill", "--network", "none", "-v", "migvol:/v", "mig/e2e:1", "/bin/busybox", "true")
	e.runWithStdin(t, treeTar, 2*time.Minute, "docker", "-H", from, "cp", "-a", "-", "migfill:/")
	src("rm", "migfill")

	src("network", "create", "--subnet", "10.213.181.0/24", "--label", "net=e2e", "migratenet")
	src("create", "--name", "migweb", "--network", "migratenet", "-p", fmt.Sprintf("%d:8080", migrateWebPort),
		"-e", "FOO=bar", "-e", "EMPTY=", "-l", "tier=front", "-l", "owner=e2e", "--restart", "unless-stopped",
		"-v", "migvol:/data", "mig/e2e:1", "/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/www")
}

// runMigrate runs `vmdock migrate --from from --json` and reads its report.
func (e *env) runMigrate(t *testing.T, from string) migrateJSONReport {
	t.Helper()
	out := e.run(5*time.Minute, e.vmdock, "migrate", "--from", from, "--json")
	var rep migrateJSONReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("migrate --json: %v\n%s", err, out)
	}
	return rep
}

// checkMigrateItems: the first run copied the image (both tags), the
// volume with its bytes, the network and the container, and failed none.
func checkMigrateItems(t *testing.T, rep migrateJSONReport) {
	t.Helper()
	if rep.Failed != 0 {
		t.Errorf("the first run failed %d items: %+v", rep.Failed, rep.Items)
	}
	want := map[string]bool{"image mig/e2e:1, mig/e2e:latest": false, "volume migvol": false, "network migratenet": false, "container migweb": false}
	for _, it := range rep.Items {
		key := it.Kind + " " + it.Name
		if _, ok := want[key]; ok && it.Result == "copied" {
			want[key] = true
		}
		if key == "volume migvol" && it.Bytes < migrateBlobs<<20 {
			t.Errorf("volume migvol moved %d bytes, want at least %d", it.Bytes, migrateBlobs<<20)
		}
	}
	for key, copied := range want {
		if !copied {
			t.Errorf("the first run did not copy %s: %+v", key, rep.Items)
		}
	}
}

// volumeTree reads volume migvol's files through a never-started
// container of docker (the source's or the instance's).
func volumeTree(t *testing.T, docker func(...string) string) map[string]migratetest.FileFacts {
	t.Helper()
	docker("create", "--name", "migread", "--network", "none", "-v", "migvol:/v", "mig/e2e:1", "/bin/busybox", "true")
	defer docker("rm", "migread")
	files, err := migratetest.ReadTree(strings.NewReader(docker("cp", "migread:/v", "-")))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkMigratedVolume: every file's sha256, mode, owner and link target
// are the source's, the volume's labels too.
func checkMigratedVolume(t *testing.T, e *env, src func(...string) string) {
	t.Helper()
	dst := func(args ...string) string { return e.docker(2*time.Minute, args...) }
	a, b := volumeTree(t, src), volumeTree(t, dst)
	if !reflect.DeepEqual(a, b) || len(a) != migratetest.VolumeTreeEntries(migrateBlobs) {
		t.Errorf("volume migvol's files differ (%d entries at the source):\nsource %+v\ninstance %+v", len(a), a, b)
	}
	if f := b["v/secret"]; f.Mode&0o7777 != 0o600 || f.UID != 1234 || f.GID != 1234 {
		t.Errorf("v/secret on the instance: %+v, want 0600 of uid 1234", f)
	}
	if f := b["v/latest"]; f.Link != fmt.Sprintf("blobs/b%d", migrateBlobs-1) {
		t.Errorf("v/latest on the instance: %+v, want a symlink", f)
	}
	if _, ok := b["v/empty/"]; !ok {
		t.Error("the empty folder is missing on the instance")
	}
	// The instance's copy also carries migrate's own mark.
	const f = "{{json .Labels}}"
	var x, y map[string]string
	must(t, json.Unmarshal([]byte(src("volume", "inspect", "-f", f, "migvol")), &x))
	must(t, json.Unmarshal([]byte(dst("volume", "inspect", "-f", f, "migvol")), &y))
	mark := y["vmdock.migrate.copy"]
	delete(y, "vmdock.migrate.copy")
	if !reflect.DeepEqual(x, y) || mark == "" {
		t.Errorf("volume migvol's labels: source %v, instance %v with mark %q", x, y, mark)
	}
}

// inspected is what checkMigratedContainer compares of docker inspect.
type inspected struct {
	ID              string `json:"Id"`
	Config          map[string]any
	HostConfig      map[string]any
	NetworkSettings struct{ Networks map[string]any }
}

func inspectOne(t *testing.T, out string) inspected {
	t.Helper()
	var list []inspected
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
		t.Fatalf("docker inspect: %v\n%s", err, out)
	}
	c := list[0]
	// The default hostname is the ID's start, another on each engine.
	if h, _ := c.Config["Hostname"].(string); h != "" && strings.HasPrefix(c.ID, h) {
		delete(c.Config, "Hostname")
	}
	return c
}

// checkMigratedContainer compares migweb's Config and HostConfig field by
// field, and its networks. A field only one engine's version reports is
// equal when the other holds its zero value.
func checkMigratedContainer(t *testing.T, e *env, src func(...string) string) {
	t.Helper()
	a := inspectOne(t, src("inspect", "--type", "container", "migweb"))
	b := inspectOne(t, e.docker(time.Minute, "inspect", "--type", "container", "migweb"))
	for _, part := range []struct {
		what string
		x, y map[string]any
	}{{"Config", a.Config, b.Config}, {"HostConfig", a.HostConfig, b.HostConfig}} {
		for _, k := range unionKeys(part.x, part.y) {
			x, y := part.x[k], part.y[k]
			if !reflect.DeepEqual(x, y) && !(isZeroJSON(x) && isZeroJSON(y)) {
				t.Errorf("migweb %s.%s: source %v, instance %v", part.what, k, x, y)
			}
		}
	}
	if x, y := unionKeys(a.NetworkSettings.Networks, nil), unionKeys(b.NetworkSettings.Networks, nil); !reflect.DeepEqual(x, y) {
		t.Errorf("migweb's networks: source %v, instance %v", x, y)
	}
	if env := fmt.Sprint(b.Config["Env"]); !strings.Contains(env, "FOO=bar") || !strings.Contains(env, "EMPTY=") {
		t.Errorf("migweb's env on the instance: %s", env)
	}
}

func unionKeys(x, y map[string]any) []string {
	var keys []string
	for k := range x {
		keys = append(keys, k)
	}
	for k := range y {
		if _, ok := x[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// isZeroJSON reports whether a decoded JSON value is null, "", 0, false
// or empty.
func isZeroJSON(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case float64:
		return x == 0
	case bool:
		return !x
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// migrateLists is what the source must still list after the runs.
func migrateLists(src func(...string) string) map[string][]string {
	out := map[string][]string{}
	for what, args := range map[string][]string{
		"images":     {"image", "ls", "-a", "--no-trunc", "--format", "{{.ID}} {{.Repository}}:{{.Tag}}"},
		"volumes":    {"volume", "ls", "--format", "{{.Name}} {{.Labels}}"},
		"containers": {"ps", "-a", "--no-trunc", "--format", "{{.ID}} {{.Names}} {{.State}}"},
		"networks":   {"network", "ls", "--no-trunc", "--format", "{{.ID}} {{.Name}}"},
	} {
		lines := strings.Split(strings.TrimSpace(src(args...)), "\n")
		sort.Strings(lines)
		out[what] = lines
	}
	return out
}
