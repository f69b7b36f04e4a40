package migrate

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/migrate/migratetest"
)

// fillSource gives the source engine everything a migration meets.
func fillSource(t *testing.T, src *Engine) {
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("busybox-static is needed for the test images: %v", err)
	}
	importImage(t, src, "mig/busybox", "1", map[string][]byte{"bin/busybox": busybox, "bin/sh": busybox})
	for _, tag := range []struct{ repo, tag string }{{"mig/busybox", "latest"}, {"mig/alias", "v1"}} {
		mustCall(t, src, http.MethodPost, "/images/mig/busybox:1/tag", url.Values{"repo": {tag.repo}, "tag": {tag.tag}}, nil, nil)
	}
	importImage(t, src, "mig/tool", "2", map[string][]byte{"bin/busybox": busybox, "etc/tool.conf": []byte("x=1\n")})

	mustCall(t, src, http.MethodPost, "/volumes/create", nil, map[string]any{"Name": "appdata", "Labels": map[string]string{"owner": "test"}}, nil)
	mustCall(t, src, http.MethodPost, "/networks/create", nil, map[string]any{
		"Name": "appnet", "Driver": "bridge", "Labels": map[string]string{"net": "1"},
		"IPAM": map[string]any{"Config": []map[string]string{{"Subnet": "10.213.47.0/24", "Gateway": "10.213.47.1"}}},
	}, nil)
	fillVolume(t, src, "appdata")

	mustCall(t, src, http.MethodPost, "/containers/create", url.Values{"name": {"web"}}, map[string]any{
		"Image": "mig/busybox:1", "Cmd": []string{"sleep", "1000"}, "Env": []string{"FOO=bar", "EMPTY="},
		"Labels": map[string]string{"tier": "front"}, "ExposedPorts": map[string]any{"8080/tcp": map[string]any{}},
		"HostConfig": map[string]any{
			"PortBindings":  map[string]any{"8080/tcp": []map[string]string{{"HostIp": "127.0.0.1", "HostPort": "18080"}}},
			"RestartPolicy": map[string]any{"Name": "unless-stopped"},
			"Binds":         []string{"appdata:/data"},
			"NetworkMode":   "appnet",
		},
		"NetworkingConfig": map[string]any{"EndpointsConfig": map[string]any{"appnet": map[string]any{"Aliases": []string{"www"}}}},
	}, nil)
	mustCall(t, src, http.MethodPost, "/containers/create", url.Values{"name": {"proj-app-1"}}, map[string]any{
		"Image": "mig/tool:2", "Entrypoint": []string{"/bin/busybox"}, "Cmd": []string{"true"},
		"Labels":     map[string]string{"com.docker.compose.project": "proj", "com.docker.compose.service": "app", "com.docker.compose.container-number": "1"},
		"HostConfig": map[string]any{"NetworkMode": "none"},
	}, nil)
}

// fillVolume writes ~50 MB of files, a symlink, a 0600 file of uid 1234
// and an empty folder into the volume through a throwaway container.
func fillVolume(t *testing.T, e *Engine, name string) {
	h := &helpers{engine: e}
	defer h.removeAll(context.Background())
	id, err := h.create(context.Background(), name, false)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(migratetest.WriteVolumeTree(pw, strings.TrimPrefix(volumeMountPath, "/"), 10, 5<<20))
	}()
	resp, err := e.Do(context.Background(), http.MethodPut, "/containers/"+id+"/archive", url.Values{"path": {"/"}, "copyUIDGID": {"1"}}, pr, "application/x-tar")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func volumeFiles(t *testing.T, e *Engine, name string) map[string]migratetest.FileFacts {
	h := &helpers{engine: e}
	defer h.removeAll(context.Background())
	id, err := h.create(context.Background(), name, true)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.Do(context.Background(), http.MethodGet, "/containers/"+id+"/archive", url.Values{"path": {volumeMountPath}}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	files, err := migratetest.ReadTree(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// engineLists is what the source must still show after a migration.
func engineLists(t *testing.T, e *Engine) map[string][]string {
	out := map[string][]string{}
	var imgs []imageSummary
	mustCall(t, e, http.MethodGet, "/images/json", url.Values{"all": {"1"}}, nil, &imgs)
	for _, i := range imgs {
		out["images"] = append(out["images"], fmt.Sprint(i.ID, i.RepoTags))
	}
	var vols struct{ Volumes []volume }
	mustCall(t, e, http.MethodGet, "/volumes", nil, nil, &vols)
	for _, v := range vols.Volumes {
		out["volumes"] = append(out["volumes"], v.Name)
	}
	var cs []containerSummary
	mustCall(t, e, http.MethodGet, "/containers/json", url.Values{"all": {"1"}}, nil, &cs)
	for _, c := range cs {
		out["containers"] = append(out["containers"], fmt.Sprint(c.Names, c.State))
	}
	var nets []network
	mustCall(t, e, http.MethodGet, "/networks", nil, nil, &nets)
	for _, n := range nets {
		out["networks"] = append(out["networks"], n.Name)
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

func TestRunBetweenRealEngines(t *testing.T) {
	src, dst := requireEngines(t)
	fillSource(t, src)
	before := engineLists(t, src)
	opts := Options{Source: src, Target: dst, RecordPath: filepath.Join(t.TempDir(), "migrate.json")}

	// A run cut in the middle of the volume leaves a partial copy.
	ctx, cancel := context.WithCancel(context.Background())
	opts.Progress = func(ev Event) {
		if ev.Kind == "volume" && ev.Bytes > 0 && ev.Result == "" {
			cancel()
		}
	}
	if _, err := Run(ctx, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("cut run: want context.Canceled, got %v", err)
	}
	assertNoHelpers(t, src, dst)
	if rec, err := loadRecord(opts.RecordPath); err != nil || !slices.ContainsFunc(rec.Unfinished, named("appdata")) {
		t.Fatalf("after the cut the record should mark appdata unfinished: %+v %v", rec, err)
	}

	opts.Progress = nil
	rep, err := Run(context.Background(), opts)
	if err != nil || rep.Count(Failed) > 0 {
		t.Fatalf("second run: %v %+v", err, rep.Items)
	}
	assertNoHelpers(t, src, dst)
	if it := findItem(rep, "volume", "appdata"); it.Result != Copied || it.Bytes < 50<<20 {
		t.Errorf("second run should copy appdata again whole: %+v", it)
	}
	assertImagesEqual(t, src, dst)
	a, b := volumeFiles(t, src, "appdata"), volumeFiles(t, dst, "appdata")
	if !reflect.DeepEqual(a, b) || len(a) != migratetest.VolumeTreeEntries(10) {
		t.Errorf("volume files differ (%d entries at the source):\nsource %+v\ntarget %+v", len(a), a, b)
	}
	if f := b["vmdock-volume/secret"]; f.Mode&0o7777 != 0o600 || f.UID != 1234 || f.GID != 1234 {
		t.Errorf("secret on the target: %+v", f)
	}
	if f, ok := b["vmdock-volume/latest"]; !ok || f.Link != "blobs/b9" {
		t.Errorf("symlink on the target: %+v", f)
	}
	if _, ok := b["vmdock-volume/empty/"]; !ok {
		t.Error("the empty folder is missing on the target")
	}
	assertVolumeMeta(t, src, dst, "appdata")
	var srcNet, dstNet network
	mustCall(t, src, http.MethodGet, "/networks/appnet", nil, nil, &srcNet)
	mustCall(t, dst, http.MethodGet, "/networks/appnet", nil, nil, &dstNet)
	if !reflect.DeepEqual(srcNet, dstNet) || len(dstNet.IPAM.Config) != 1 || dstNet.IPAM.Config[0]["Subnet"] != "10.213.47.0/24" {
		t.Errorf("network appnet: source %+v, target %+v", srcNet, dstNet)
	}
	for _, name := range []string{"web", "proj-app-1"} {
		assertContainerEqual(t, src, dst, name)
	}
	if after := engineLists(t, src); !reflect.DeepEqual(before, after) {
		t.Errorf("source changed:\nbefore %v\nafter  %v", before, after)
	}

	// A killed run's helper keeps its volume in use; the next run removes it.
	if _, err := (&helpers{engine: dst}).create(context.Background(), "appdata", true); err != nil {
		t.Fatal(err)
	}
	rep, err = Run(context.Background(), opts)
	if err != nil || rep.Count(Copied) != 0 || rep.Count(Failed) != 0 || rep.Count(Present) != len(rep.Items) {
		t.Errorf("third run should find everything present: %v %+v", err, rep.Items)
	}
	assertNoHelpers(t, src, dst)
	t.Run("refusals", func(t *testing.T) { checkRefusals(t, src, dst, opts) })
	t.Run("volume in use", func(t *testing.T) { checkVolumeInUse(t, src, dst, opts) })
	t.Run("occupied", func(t *testing.T) { checkOccupied(t, src, dst, opts) })
	t.Run("stale record", func(t *testing.T) { checkStaleRecord(t, src, dst, opts) })
	t.Run("bind volume", func(t *testing.T) { checkBindVolume(t, src, dst, opts) })
}

// putFile writes one file into a volume through a throwaway container.
func putFile(t *testing.T, e *Engine, vol, name, data string) {
	t.Helper()
	mustCall(t, e, http.MethodPost, "/volumes/create", nil, map[string]any{"Name": vol}, nil)
	h := &helpers{engine: e}
	defer h.removeAll(context.Background())
	id, err := h.create(context.Background(), vol, false)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(1690000000, 0)})
		_, _ = tw.Write([]byte(data))
		pw.CloseWithError(tw.Close())
	}()
	resp, err := e.Do(context.Background(), http.MethodPut, "/containers/"+id+"/archive", url.Values{"path": {volumeMountPath}}, pr, "application/x-tar")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// checkOccupied: a target volume or tag holding something else is kept
// and reported unless Overwrite; an empty target volume is filled.
func checkOccupied(t *testing.T, src, dst *Engine, opts Options) {
	putFile(t, src, "taken", "from-source", "s")
	putFile(t, dst, "taken", "from-target", "t")
	putFile(t, src, "waiting", "data", "d")
	mustCall(t, dst, http.MethodPost, "/volumes/create", nil, map[string]any{"Name": "waiting"}, nil)
	busybox, _ := os.ReadFile("/bin/busybox")
	importImage(t, src, "mig/clash", "1", map[string][]byte{"bin/busybox": busybox, "side": []byte("source")})
	importImage(t, dst, "mig/clash", "1", map[string][]byte{"bin/busybox": busybox, "side": []byte("target")})

	opts.Images, opts.Volumes = true, true
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if it := findItem(rep, "volume", "taken"); it.Result != Failed || !strings.Contains(it.Detail, "volume taken with other contents") {
		t.Errorf("occupied volume: %+v", it)
	}
	if it := findItem(rep, "image", "mig/clash:1"); it.Result != Failed || !strings.Contains(it.Detail, "mig/clash:1 already names another image") {
		t.Errorf("tag clash: %+v", it)
	}
	if it := findItem(rep, "volume", "waiting"); it.Result != Copied {
		t.Errorf("empty target volume: %+v", it)
	}
	if a, b := volumeFiles(t, src, "waiting"), volumeFiles(t, dst, "waiting"); !reflect.DeepEqual(a, b) {
		t.Errorf("waiting: source %+v, target %+v", a, b)
	}
	if _, ok := volumeFiles(t, dst, "taken")["vmdock-volume/from-target"]; !ok {
		t.Error("the occupied target volume was changed without Overwrite")
	}

	opts.Overwrite = true
	rep, err = Run(context.Background(), opts)
	if err != nil || rep.Count(Failed) != 0 {
		t.Fatalf("with Overwrite: %v %+v", err, rep.Items)
	}
	if a, b := volumeFiles(t, src, "taken"), volumeFiles(t, dst, "taken"); !reflect.DeepEqual(a, b) {
		t.Errorf("taken after Overwrite: source %+v, target %+v", a, b)
	}
	s, _ := inspectImage(context.Background(), src, "mig/clash:1")
	d, _ := inspectImage(context.Background(), dst, "mig/clash:1")
	if s.ID != d.ID {
		t.Errorf("mig/clash:1 after Overwrite: target %s, source %s", d.ID, s.ID)
	}
}

// checkRefusals: a name clash, a container on an untagged image and a
// bind outside the shares each fail alone, naming the item; a dry run
// changes nothing.
func checkRefusals(t *testing.T, src, dst *Engine, opts Options) {
	create := func(e *Engine, name string, body map[string]any) {
		t.Helper()
		mustCall(t, e, http.MethodPost, "/containers/create", url.Values{"name": {name}}, body, nil)
	}
	create(src, "clash", map[string]any{"Image": "mig/busybox:1", "Cmd": []string{"echo", "source"}})
	create(dst, "clash", map[string]any{"Image": "mig/busybox:1", "Cmd": []string{"echo", "target"}})
	busybox, _ := os.ReadFile("/bin/busybox")
	importImage(t, src, "mig/moving", "1", map[string][]byte{"bin/busybox": busybox})
	create(src, "orphan", map[string]any{"Image": "mig/moving:1", "Cmd": []string{"true"}})
	// The tag moves on to a new image: orphan's image has no tag left.
	importImage(t, src, "mig/moving", "1", map[string][]byte{"bin/busybox": busybox, "new": []byte("x")})
	create(src, "binder", map[string]any{"Image": "mig/busybox:1", "Cmd": []string{"true"}, "HostConfig": map[string]any{"Binds": []string{"/srv/outside:/x"}}})
	mustCall(t, src, http.MethodPost, "/volumes/create", nil, map[string]any{"Name": "fresh"}, nil)

	opts.DryRun = true
	opts.BindAllowed = func(p string) bool { return p == "/home/shared" || strings.HasPrefix(p, "/home/shared/") }
	before := engineLists(t, dst)
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if after := engineLists(t, dst); !reflect.DeepEqual(before, after) {
		t.Errorf("a dry run changed the target:\nbefore %v\nafter  %v", before, after)
	}
	if it := findItem(rep, "volume", "fresh"); it.Result != Planned {
		t.Errorf("dry run: volume fresh %+v, want planned", it)
	}
	if it := findItem(rep, "image", "mig/moving:1"); it.Result != Planned {
		t.Errorf("dry run: image mig/moving:1 %+v, want planned", it)
	}
	for name, want := range map[string]string{
		"clash":  "already has a container named clash",
		"orphan": "runs on the untagged image",
		"binder": "binds /srv/outside, which is outside vmdock's shares",
	} {
		it := findItem(rep, "container", name)
		if it.Result != Failed || !strings.Contains(it.Detail, want) || strings.Contains(it.Detail, "\n") {
			t.Errorf("container %s: %+v; want one failed line with %q", name, it, want)
		}
	}
	if n := rep.Count(Failed); n != 3 {
		t.Errorf("%d failures, want the 3 refusals: %+v", n, rep.Items)
	}
	for _, name := range []string{"clash", "orphan", "binder"} {
		mustCall(t, src, http.MethodDelete, "/containers/"+name, nil, nil, nil)
	}
	mustCall(t, dst, http.MethodDelete, "/containers/clash", nil, nil, nil)
}

// checkVolumeInUse: a volume a running source container mounts is
// skipped naming the container, and with StopSource copied while the
// container is stopped, which runs again afterwards.
func checkVolumeInUse(t *testing.T, src, dst *Engine, opts Options) {
	mustCall(t, src, http.MethodPost, "/volumes/create", nil, map[string]any{"Name": "busy"}, nil)
	mustCall(t, src, http.MethodPost, "/containers/create", url.Values{"name": {"runner"}}, map[string]any{
		"Image": "mig/busybox:1", "Cmd": []string{"/bin/busybox", "sleep", "600"}, "StopTimeout": 1,
		"HostConfig": map[string]any{"Binds": []string{"busy:/busy"}, "NetworkMode": "none"},
	}, nil)
	if err := src.Call(context.Background(), http.MethodPost, "/containers/runner/start", nil, nil, nil); err != nil {
		t.Skipf("containers cannot run on this host's test engine: %v", err)
	}
	defer mustCall(t, src, http.MethodDelete, "/containers/runner", url.Values{"force": {"1"}}, nil, nil)
	opts.Images, opts.Volumes = false, true
	rep, err := Run(context.Background(), opts)
	if it := findItem(rep, "volume", "busy"); err != nil || it.Result != Skipped || !strings.Contains(it.Detail, "runner") || !strings.Contains(it.Detail, "--stop-source") {
		t.Errorf("in-use volume: %v %+v", err, it)
	}
	opts.StopSource = true
	rep, err = Run(context.Background(), opts)
	if it := findItem(rep, "volume", "busy"); err != nil || it.Result != Copied {
		t.Errorf("in-use volume with StopSource: %v %+v", err, it)
	}
	c, err := inspectContainer(context.Background(), src, "runner")
	if err != nil {
		t.Fatal(err)
	}
	var state struct{ State struct{ Running bool } }
	mustCall(t, src, http.MethodGet, "/containers/"+c.ID+"/json", nil, nil, &state)
	if !state.State.Running {
		t.Error("runner was not started again after the copy")
	}
}

func assertNoHelpers(t *testing.T, engines ...*Engine) {
	t.Helper()
	for _, e := range engines {
		var cs []containerSummary
		mustCall(t, e, http.MethodGet, "/containers/json", url.Values{"all": {"1"}}, nil, &cs)
		for _, c := range cs {
			if isHelperName(c.Names[0]) {
				t.Errorf("helper %s left on %s", c.Names[0], e.Socket)
			}
		}
		if _, err := inspectImage(context.Background(), e, helperImageTag); !isNotFound(err) {
			t.Errorf("helper image left on %s: %v", e.Socket, err)
		}
	}
}

func assertImagesEqual(t *testing.T, src, dst *Engine) {
	t.Helper()
	list, err := taggedImages(context.Background(), src)
	if err != nil || len(list) != 2 {
		t.Fatalf("source images: %v %+v", err, list)
	}
	for _, img := range list {
		s, _ := inspectImage(context.Background(), src, img.ID)
		for _, tag := range img.Tags {
			d, err := inspectImage(context.Background(), dst, tag)
			if err != nil {
				t.Errorf("%s on the target: %v", tag, err)
				continue
			}
			if d.ID != s.ID || !reflect.DeepEqual(d.RootFS.Layers, s.RootFS.Layers) {
				t.Errorf("%s: target config %s layers %v, source %s %v", tag, d.ID, d.RootFS.Layers, s.ID, s.RootFS.Layers)
			}
		}
	}
}

func assertVolumeMeta(t *testing.T, src, dst *Engine, name string) {
	t.Helper()
	var a, b volume
	mustCall(t, src, http.MethodGet, "/volumes/"+name, nil, nil, &a)
	mustCall(t, dst, http.MethodGet, "/volumes/"+name, nil, nil, &b)
	if b.Labels[copyLabel] == "" {
		t.Errorf("volume %s on the target has no %s mark", name, copyLabel)
	}
	delete(b.Labels, copyLabel)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("volume %s: source %+v, target %+v", name, a, b)
	}
}

func assertContainerEqual(t *testing.T, src, dst *Engine, name string) {
	t.Helper()
	a, err := inspectContainer(context.Background(), src, name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := inspectContainer(context.Background(), dst, name)
	if err != nil {
		t.Fatalf("%s on the target: %v", name, err)
	}
	sa, sb := SpecOf(a), SpecOf(b)
	for _, part := range []struct {
		what string
		x, y map[string]any
	}{{"Config", sa.Config, sb.Config}, {"HostConfig", sa.HostConfig, sb.HostConfig}} {
		for k := range part.x {
			if !reflect.DeepEqual(part.x[k], part.y[k]) {
				t.Errorf("%s %s.%s: source %v, target %v", name, part.what, k, part.x[k], part.y[k])
			}
		}
	}
	if !reflect.DeepEqual(sa.Networks, sb.Networks) {
		t.Errorf("%s networks: source %v, target %v", name, sa.Networks, sb.Networks)
	}
	if ea, eb := endpointConfig(a, "appnet"), endpointConfig(b, "appnet"); !reflect.DeepEqual(ea, eb) {
		t.Errorf("%s on appnet: source %+v, target %+v", name, ea, eb)
	}
}

// checkStaleRecord: a record that says a volume's copy did not finish,
// where the target's volume of that name is the user's own (no mark of
// migrate's, or the record older than marks), never has it replaced.
func checkStaleRecord(t *testing.T, src, dst *Engine, opts Options) {
	putFile(t, src, "mine", "from-source", "s")
	putFile(t, dst, "mine", "users-own", "u")
	opts.Images, opts.Volumes, opts.Containers = false, true, false
	for _, rec := range []string{`{"unfinished":["mine"]}`, `{"unfinished":[{"name":"mine","mark":"0a1b2c3d4e5f"}]}`} {
		opts.RecordPath = filepath.Join(t.TempDir(), "migrate.json")
		if err := os.WriteFile(opts.RecordPath, []byte(rec), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), opts)
		if it := findItem(rep, "volume", "mine"); err != nil || it.Result != Failed || !strings.Contains(it.Detail, "with other contents") {
			t.Errorf("record %s: volume mine %v %+v", rec, err, it)
		}
		files := volumeFiles(t, dst, "mine")
		if _, ok := files["vmdock-volume/users-own"]; !ok || len(files) != 2 {
			t.Errorf("record %s: the user's volume was changed: %+v", rec, files)
		}
	}
}

// checkBindVolume: a source volume that binds a host folder (as Docker
// Desktop's and Colima's binds under the home are) is never copied onto
// that folder, which both engines here see, as the VM and the host see a
// share: a shared one is created again as the same bind, its file whole;
// another is skipped.
func checkBindVolume(t *testing.T, src, dst *Engine, opts Options) {
	share := t.TempDir()
	data := strings.Repeat("0123456789abcdef", 1<<20)
	if err := os.WriteFile(filepath.Join(share, "big"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"shared": share, "elsewhere": t.TempDir()} {
		mustCall(t, src, http.MethodPost, "/volumes/create", nil, map[string]any{
			"Name": name, "Driver": "local", "DriverOpts": map[string]string{"type": "none", "o": "bind", "device": dir},
		}, nil)
	}
	opts.Images, opts.Volumes, opts.Containers = false, true, false
	opts.BindAllowed = func(p string) bool { return p == share }
	rep, err := Run(context.Background(), opts)
	if it := findItem(rep, "volume", "shared"); err != nil || it.Result != Copied || it.Bytes != 0 || !strings.Contains(it.Detail, "same bind") {
		t.Errorf("shared bind volume: %v %+v", err, it)
	}
	if it := findItem(rep, "volume", "elsewhere"); it.Result != Skipped || !strings.Contains(it.Detail, "outside vmdock's shares") {
		t.Errorf("bind volume outside the shares: %+v", it)
	}
	if b, err := os.ReadFile(filepath.Join(share, "big")); err != nil || string(b) != data {
		t.Errorf("the bound folder's file changed: %d bytes, %v", len(b), err)
	}
	var v volume
	mustCall(t, dst, http.MethodGet, "/volumes/shared", nil, nil, &v)
	if v.Options["device"] != share || v.Options["o"] != "bind" {
		t.Errorf("the target's volume shared: %+v", v)
	}
	if err := dst.Call(context.Background(), http.MethodGet, "/volumes/elsewhere", nil, nil, nil); !isNotFound(err) {
		t.Errorf("the volume outside the shares reached the target: %v", err)
	}
}
