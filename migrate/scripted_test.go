package migrate

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunRefusesTheTargetItself: the target's own engine reached by
// another socket path has the same engine ID.
func TestRunRefusesTheTargetItself(t *testing.T) {
	src, dst := newFakeEngine(t, "ENGINE-1"), newFakeEngine(t, "ENGINE-1")
	_, err := Run(context.Background(), Options{Source: src.Engine, Target: dst.Engine})
	if err == nil || !strings.Contains(err.Error(), "is the target engine itself (engine ID ENGINE-1)") {
		t.Fatalf("Run into itself = %v", err)
	}
	if dst.called("POST ") || dst.called("DELETE ") || src.called("POST ") {
		t.Error("a run into itself changed an engine")
	}
}

// runningUsersOf makes src list containers a and b running with volume v
// mounted, and c running without it.
func runningUsersOf(src *fakeEngine) {
	mount := []map[string]string{{"Type": "volume", "Name": "v"}}
	src.json("GET /containers/json", []map[string]any{
		{"Id": "a", "Names": []string{"/a"}, "State": "running", "Mounts": mount},
		{"Id": "b", "Names": []string{"/b"}, "State": "running", "Mounts": mount},
		{"Id": "c", "Names": []string{"/c"}, "State": "running"},
	})
	src.json("GET /volumes", map[string]any{"Volumes": []map[string]any{{"Name": "v", "Driver": "local"}}})
	for _, id := range []string{"a", "b", "c"} {
		src.handle("POST /containers/"+id+"/start", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	}
	src.handle("POST /containers/a/stop", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
}

// TestStopSourceRestartsWhatItStopped: a stop that fails after another
// succeeded, or is cut by Ctrl-C, still starts the stopped ones again,
// and only those.
func TestStopSourceRestartsWhatItStopped(t *testing.T) {
	t.Run("a later stop fails", func(t *testing.T) {
		src, dst := newFakeEngine(t, "S"), newFakeEngine(t, "T")
		runningUsersOf(src)
		src.status("POST /containers/b/stop", http.StatusInternalServerError, "cannot stop container b")
		rep, err := Run(context.Background(), Options{Source: src.Engine, Target: dst.Engine, Volumes: true, StopSource: true})
		if it := findItem(rep, "volume", "v"); err != nil || it.Result != Failed || !strings.Contains(it.Detail, "stop source container b") {
			t.Errorf("volume v: %v %+v", err, it)
		}
		if !src.called("POST /containers/a/start") {
			t.Error("a, stopped by the run, was not started again")
		}
		if src.called("POST /containers/b/start") || src.called("POST /containers/c/start") {
			t.Error("started a container the run did not stop")
		}
	})
	t.Run("ctrl-c during a stop", func(t *testing.T) {
		src, dst := newFakeEngine(t, "S"), newFakeEngine(t, "T")
		runningUsersOf(src)
		ctx, cancel := context.WithCancel(context.Background())
		src.handle("POST /containers/b/stop", func(w http.ResponseWriter, r *http.Request) {
			cancel()
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		})
		_, err := Run(ctx, Options{Source: src.Engine, Target: dst.Engine, Volumes: true, StopSource: true})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
		for _, id := range []string{"a", "b"} {
			if !src.called("POST /containers/" + id + "/start") {
				t.Errorf("%s, stopped (or maybe stopped) by the run, was not started again", id)
			}
		}
		if src.called("POST /containers/c/start") {
			t.Error("started c, which the run never stopped")
		}
	})
}

// TestHelpersLeftByAKilledRunAreRemoved: labelled helpers found at the
// start of a run are removed, on both engines.
func TestHelpersLeftByAKilledRunAreRemoved(t *testing.T) {
	src, dst := newFakeEngine(t, "S"), newFakeEngine(t, "T")
	for _, e := range []*fakeEngine{src, dst} {
		e.handle("GET /containers/json", func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Query().Get("filters"), helperLabel+"=1") {
				_, _ = w.Write([]byte(`[{"Id":"left1","Names":["/vmdock-migrate-0a1b2c"]}]`))
				return
			}
			_, _ = w.Write([]byte(`[]`))
		})
		e.handle("DELETE /containers/left1", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	}
	if _, err := Run(context.Background(), Options{Source: src.Engine, Target: dst.Engine}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*fakeEngine{src, dst} {
		if !e.called("DELETE /containers/left1") {
			t.Errorf("the leftover helper on %s was not removed", e.Socket)
		}
	}
}

// containersOn makes src list and inspect containers (name → HostConfig)
// on image app:1, and dst hold that image and create what it is asked.
func containersOn(src, dst *fakeEngine, hostConfigs map[string]map[string]any) {
	var list []map[string]any
	for name, hc := range hostConfigs {
		list = append(list, map[string]any{"Id": "id-" + name, "Names": []string{"/" + name}, "State": "exited"})
		src.json("GET /containers/id-"+name+"/json", map[string]any{
			"Id": "id-" + name, "Name": "/" + name, "Image": "sha256:app",
			"Config": map[string]any{"Image": "app:1", "Cmd": []string{"run"}}, "HostConfig": hc,
		})
	}
	src.json("GET /containers/json", list)
	img := map[string]any{"Id": "sha256:app", "RepoTags": []string{"app:1"}}
	src.json("GET /images/app:1/json", img)
	dst.json("GET /images/app:1/json", img)
	dst.json("POST /containers/create", map[string]string{"Id": "new"})
}

// TestPrivilegedContainersAreRefused: each grant beyond a plain container
// fails its container, naming it, unless AllowPrivileged.
func TestPrivilegedContainersAreRefused(t *testing.T) {
	refused := map[string]map[string]any{
		"priv":     {"Privileged": true},
		"dev":      {"Devices": []any{map[string]any{"PathOnHost": "/dev/vda", "PathInContainer": "/dev/vda", "CgroupPermissions": "rwm"}}},
		"pidhost":  {"PidMode": "host"},
		"ipchost":  {"IpcMode": "host"},
		"utshost":  {"UTSMode": "host"},
		"caps":     {"CapAdd": []any{"SYS_ADMIN"}},
		"seccomp":  {"SecurityOpt": []any{"seccomp=unconfined"}},
		"apparmor": {"SecurityOpt": []any{"apparmor:unconfined"}},
		"nolabel":  {"SecurityOpt": []any{"label=disable"}},
	}
	want := map[string]string{
		"priv": "privileged", "dev": "device /dev/vda", "pidhost": "pid=host", "ipchost": "ipc=host", "utshost": "uts=host",
		"caps": "cap-add SYS_ADMIN", "seccomp": "security-opt seccomp=unconfined", "apparmor": "security-opt apparmor:unconfined",
		"nolabel": "security-opt label=disable",
	}
	all := map[string]map[string]any{"plain": {"NetworkMode": "none", "SecurityOpt": []any{"no-new-privileges"}}}
	for k, v := range refused {
		all[k] = v
	}
	for _, allow := range []bool{false, true} {
		src, dst := newFakeEngine(t, "S"), newFakeEngine(t, "T")
		containersOn(src, dst, all)
		rep, err := Run(context.Background(), Options{Source: src.Engine, Target: dst.Engine, Containers: true, AllowPrivileged: allow})
		if err != nil {
			t.Fatal(err)
		}
		if it := findItem(rep, "container", "plain"); it.Result != Copied {
			t.Errorf("allow=%v: plain container %+v", allow, it)
		}
		for name, what := range want {
			it := findItem(rep, "container", name)
			switch {
			case !allow && (it.Result != Failed || !strings.Contains(it.Detail, "("+what+")") || !strings.Contains(it.Detail, "--allow-privileged")):
				t.Errorf("container %s: %+v; want failed naming %q", name, it, what)
			case allow && it.Result != Copied:
				t.Errorf("with AllowPrivileged, container %s: %+v", name, it)
			}
		}
	}
}

// TestVolumeDriverBindIsABind: a volume mount whose driver options bind
// a folder is checked against the shares like a plain bind.
func TestVolumeDriverBindIsABind(t *testing.T) {
	src, dst := newFakeEngine(t, "S"), newFakeEngine(t, "T")
	root := map[string]any{"Type": "volume", "Target": "/host", "VolumeOptions": map[string]any{
		"DriverConfig": map[string]any{"Name": "local", "Options": map[string]any{"type": "none", "o": "bind", "device": "/"}},
	}}
	containersOn(src, dst, map[string]map[string]any{"rootfs": {"Mounts": []any{root}}})
	shares := func(p string) bool { return strings.HasPrefix(p, "/home/") }
	rep, err := Run(context.Background(), Options{Source: src.Engine, Target: dst.Engine, Containers: true, BindAllowed: shares, AllowPrivileged: true})
	if it := findItem(rep, "container", "rootfs"); err != nil || it.Result != Failed || !strings.Contains(it.Detail, "binds /, which is outside") {
		t.Errorf("container binding / through volume options: %v %+v", err, it)
	}
	if dst.called("POST /containers/create") {
		t.Error("the container was created")
	}
}

// TestBindVolumesAreNeverCopiedInto: volumes whose options mount a folder
// or device are not filled; a bind of a shared folder is created again as
// that bind, the others are skipped with the reason.
func TestBindVolumesAreNeverCopiedInto(t *testing.T) {
	src, dst := newFakeEngine(t, "S"), newFakeEngine(t, "T")
	vols := []map[string]any{
		{"Name": "homebind", "Driver": "local", "Options": map[string]string{"type": "none", "o": "bind", "device": "/home/me/proj"}},
		{"Name": "rootbind", "Driver": "local", "Options": map[string]string{"type": "none", "o": "rbind,ro", "device": "/"}},
		{"Name": "blockdev", "Driver": "local", "Options": map[string]string{"type": "ext4", "device": "/dev/vda"}},
		{"Name": "nfs", "Driver": "local", "Options": map[string]string{"type": "nfs", "o": "addr=10.0.0.1", "device": ":/export"}},
	}
	src.json("GET /volumes", map[string]any{"Volumes": vols})
	dst.handle("POST /volumes/create", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	shares := func(p string) bool { return strings.HasPrefix(p, "/home/me/") }
	rep, err := Run(context.Background(), Options{Source: src.Engine, Target: dst.Engine, Volumes: true, BindAllowed: shares})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"homebind": {Copied, "same bind of /home/me/proj"},
		"rootbind": {Skipped, "binds / on the source, outside vmdock's shares"},
		"blockdev": {Skipped, "mounts /dev/vda (type ext4)"},
		"nfs":      {Skipped, "mounts :/export (type nfs)"},
	}
	for name, w := range want {
		if it := findItem(rep, "volume", name); it.Result != w[0] || !strings.Contains(it.Detail, w[1]) || it.Bytes != 0 {
			t.Errorf("volume %s: %+v; want %s with %q", name, it, w[0], w[1])
		}
	}
	if b := string(dst.body("POST /volumes/create")); !strings.Contains(b, `"device":"/home/me/proj"`) || !strings.Contains(b, `"homebind"`) {
		t.Errorf("the bind was created as %s", b)
	}
	for _, e := range []*fakeEngine{src, dst} {
		if e.called("POST /containers/create") || e.called("PUT /containers/") || e.called("GET /containers/vmdock") {
			t.Errorf("a copy was started on %s", e.Socket)
		}
	}
}

// TestExportNamesOnlyTheMovedTags: a source whose export names more tags
// than were asked (manifest.json, repositories, index.json) has only the
// asked ones reach the target's load; the rest of the archive is intact.
func TestExportNamesOnlyTheMovedTags(t *testing.T) {
	src, dst := newFakeEngine(t, "S"), newFakeEngine(t, "T")
	layer := strings.Repeat("L", 3000)
	archive := exportTar(t, [][2]string{
		{"abc.json", `{"rootfs":{}}`},
		{"l1/layer.tar", layer},
		{"manifest.json", `[{"Config":"abc.json","RepoTags":["mig/a:1","postgres:16"],"Layers":["l1/layer.tar"]},{"Config":"abc.json","RepoTags":["docker.io/library/redis:7"]}]`},
		{"repositories", `{"mig/a":{"1":"abc"},"postgres":{"16":"abc"}}`},
		{"index.json", `{"schemaVersion":2,"manifests":[{"digest":"sha256:m1","annotations":{"io.containerd.image.name":"docker.io/mig/a:1"}},{"digest":"sha256:m2","annotations":{"io.containerd.image.name":"docker.io/library/postgres:16"}}]}`},
	})
	src.handle("GET /images/get", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) })
	dst.handle("POST /images/load", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"stream":"Loaded"}`)) })
	config, _, err := streamImage(context.Background(), src.Engine, dst.Engine, []string{"mig/a:1"}, func(int64) {})
	if err != nil || config != "sha256:abc" {
		t.Fatalf("streamImage = %q, %v", config, err)
	}
	got := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(dst.body("POST /images/load")))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	want := map[string]string{
		"abc.json":      `{"rootfs":{}}`,
		"l1/layer.tar":  layer,
		"manifest.json": `[{"Config":"abc.json","Layers":["l1/layer.tar"],"RepoTags":["mig/a:1"]}]`,
		"repositories":  `{"mig/a":{"1":"abc"}}`,
		"index.json":    `{"manifests":[{"annotations":{"io.containerd.image.name":"docker.io/mig/a:1"},"digest":"sha256:m1"}],"schemaVersion":2}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the target loaded:\n%q\nwant:\n%q", got, want)
	}
}

// copyableVolume makes src hold volume big (size bytes per its df) with a
// helper that reads it, and dst create volumes and helpers; what dst's
// archive upload answers is put.
func copyableVolume(src, dst *fakeEngine, size int64, put http.HandlerFunc) {
	src.json("GET /volumes", map[string]any{"Volumes": []map[string]any{{"Name": "big", "Driver": "local"}}})
	src.json("GET /system/df", map[string]any{"Volumes": []map[string]any{{"Name": "big", "UsageData": map[string]any{"Size": size}}}})
	for _, e := range []*fakeEngine{src, dst} {
		e.json("GET /images/json", []map[string]any{{"Id": "sha256:any"}})
		e.json("POST /containers/create", map[string]string{"Id": "helper"})
		e.handle("DELETE /containers/helper", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	}
	src.handle("GET /containers/helper/archive", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte{0}, 4096))
	})
	var mu sync.Mutex
	created := false
	dst.handle("GET /volumes/big", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !created {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"Name":"big","CreatedAt":"2026-12-07T10:00:00Z"}`))
	})
	dst.handle("POST /volumes/create", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		created = true
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})
	dst.handle("DELETE /volumes/big", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		created = false
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	dst.handle("PUT /containers/helper/archive", put)
}

// TestDiskFull: a volume larger than the target's free space is refused
// before anything is created; a copy that fails on the way (the disk
// filled) has the volume this run created removed, and the record forgets
// it.
func TestDiskFull(t *testing.T) {
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	src, dst := newFakeEngine(t, "S"), newFakeEngine(t, "T")
	copyableVolume(src, dst, 10<<30, ok)
	free := func(context.Context) (int64, error) { return 1 << 30, nil }
	rep, err := Run(context.Background(), Options{Source: src.Engine, Target: dst.Engine, Volumes: true, TargetFree: free})
	if it := findItem(rep, "volume", "big"); err != nil || it.Result != Failed || !strings.Contains(it.Detail, "needs 10.0 GiB and the target's disk has 1.0 GiB free") {
		t.Errorf("too big: %v %+v", err, it)
	}
	if dst.called("POST /volumes/create") || dst.called("POST /containers/create") {
		t.Error("a volume too big for the target was started")
	}

	src, dst = newFakeEngine(t, "S"), newFakeEngine(t, "T")
	copyableVolume(src, dst, 0, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"message":"write /var/lib/docker/volumes/big/_data/x: no space left on device"}`))
	})
	recPath := filepath.Join(t.TempDir(), "migrate.json")
	rep, err = Run(context.Background(), Options{Source: src.Engine, Target: dst.Engine, Volumes: true, RecordPath: recPath})
	if it := findItem(rep, "volume", "big"); err != nil || it.Result != Failed || !strings.Contains(it.Detail, "no space left") {
		t.Errorf("disk filled: %v %+v", err, it)
	}
	if !dst.called("DELETE /volumes/big") {
		t.Error("the half copy this run created was left on the target")
	}
	if rec, err := loadRecord(recPath); err != nil || len(rec.Unfinished)+len(rec.Copied) != 0 {
		t.Errorf("the record still names the removed copy: %+v %v", rec, err)
	}
}

// TestSecondRunAcrossEngineVersions: a target engine of another version
// answers inspect with defaults of its own (restart policy "no", empty
// lists, "bridge" for "default"); a second run with nothing changed finds
// the container there, and one whose source changed is reported.
func TestSecondRunAcrossEngineVersions(t *testing.T) {
	src, dst := newFakeEngine(t, "S"), newFakeEngine(t, "T")
	// As docker 20.10's CLI creates and its engine answers.
	hc := map[string]any{
		"NetworkMode": "default", "RestartPolicy": map[string]any{"Name": "", "MaximumRetryCount": 0},
		"Binds": nil, "Mounts": nil, "PortBindings": map[string]any{}, "LogConfig": map[string]any{"Type": "json-file"},
	}
	containersOn(src, dst, map[string]map[string]any{"app": hc})
	var mu sync.Mutex
	var asked map[string]any
	dst.handle("POST /containers/create", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_ = json.Unmarshal(dst.body("POST /containers/create"), &asked)
		_, _ = w.Write([]byte(`{"Id":"new"}`))
	})
	// As a newer engine answers for what it was asked.
	dst.handle("GET /containers/app/json", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if asked == nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		cfg := map[string]any{"Hostname": "new", "Labels": map[string]any{}, "Env": nil, "AttachStdout": false}
		for k, v := range asked {
			if k != "HostConfig" {
				cfg[k] = v
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Id": "new", "Name": "/app", "Image": "sha256:app", "Config": cfg, "HostConfig": map[string]any{
			"NetworkMode": "bridge", "RestartPolicy": map[string]any{"Name": "no", "MaximumRetryCount": 0},
			"Binds": []any{}, "Mounts": []any{}, "PortBindings": map[string]any{}, "LogConfig": map[string]any{"Type": "json-file", "Config": map[string]any{}},
			"CgroupnsMode": "private", "ConsoleSize": []any{0, 0},
		}})
	})
	opts := Options{Source: src.Engine, Target: dst.Engine, Containers: true, RecordPath: filepath.Join(t.TempDir(), "migrate.json")}
	for run, want := range []string{Copied, Present} {
		rep, err := Run(context.Background(), opts)
		if it := findItem(rep, "container", "app"); err != nil || it.Result != want {
			t.Errorf("run %d: %v %+v, want %s", run+1, err, it, want)
		}
	}
	src.json("GET /containers/id-app/json", map[string]any{
		"Id": "id-app", "Name": "/app", "Image": "sha256:app",
		"Config": map[string]any{"Image": "app:1", "Cmd": []string{"run", "--changed"}}, "HostConfig": hc,
	})
	rep, err := Run(context.Background(), opts)
	if it := findItem(rep, "container", "app"); err != nil || it.Result != Failed || !strings.Contains(it.Detail, "another configuration") {
		t.Errorf("after the source changed: %v %+v", err, it)
	}
}
