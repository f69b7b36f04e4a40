package store

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/vmdock/vmdock/vm/config"
)

// The file names are what instances made by earlier versions hold: a
// rename would lose a user's disk or config, and `delete` would no longer
// know the old name as vmdock's.
func TestInstancePaths(t *testing.T) {
	inst, err := Open("/h", "dev")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		got, want string
	}{
		{inst.ConfigPath(), "vmdock.yaml"}, {inst.LockPath(), "lock"}, {inst.DiskPath(), "disk.raw"},
		{inst.DataDiskPath(), "data.raw"}, {inst.BootDiskPath(), "boot.iso"},
		{inst.AgentSocketPath(), "agent.sock"}, {inst.ControlSocketPath(), "ha.sock"},
		{inst.PIDPath(), "ha.pid"}, {inst.DockerSocketPath(), "docker.sock"},
		{inst.ContainerdSocketPath(), "containerd.sock"}, {inst.SerialLogPath(), "serial.log"},
		{inst.HostAgentLogPath(), "hostagent.log"}, {inst.GuestAgentLogPath(), "guestagent.log"},
		{inst.StatePath(), "state.json"}, {inst.SpecPath(), "spec.json"},
		{inst.DataRuntimePath(), "data.runtime"}, {inst.UpgradeImagePath(), "upgrade-image"},
		{inst.BrokenPath(), "broken"}, {inst.SavedStateDir(), "state"}, {inst.SyncDataPath(), "sync"},
	} {
		if want := filepath.Join("/h/dev", tt.want); tt.got != want {
			t.Errorf("path %s, want %s", tt.got, want)
		}
	}
}

// Every file a path method names is one `delete` may remove, and the two
// folders are the ones it removes with their contents.
func TestPathsAreInstanceFiles(t *testing.T) {
	inst := &Instance{Name: "x", Dir: "/h/x"}
	for _, p := range []string{
		inst.ConfigPath(), inst.LockPath(), inst.DiskPath(), inst.DataDiskPath(), inst.BootDiskPath(),
		inst.AgentSocketPath(), inst.ControlSocketPath(), inst.PIDPath(), inst.DockerSocketPath(),
		inst.ContainerdSocketPath(), inst.SerialLogPath(), inst.HostAgentLogPath(), inst.GuestAgentLogPath(),
		inst.StatePath(), inst.SpecPath(), inst.DataRuntimePath(), inst.UpgradeImagePath(), inst.BrokenPath(),
		inst.RemoteKeyPath(),
	} {
		if !IsInstanceFile(filepath.Base(p)) {
			t.Errorf("%s: a path method's file is not vmdock's", filepath.Base(p))
		}
		if IsInstanceDir(filepath.Base(p)) {
			t.Errorf("%s: a file taken for a folder", filepath.Base(p))
		}
	}
	for _, d := range []string{inst.SavedStateDir(), inst.SyncDataPath()} {
		if !IsInstanceDir(filepath.Base(d)) {
			t.Errorf("%s: not a folder vmdock makes", d)
		}
	}
	for _, n := range []string{"photos", "sync.old", "State", ".sync", ""} {
		if IsInstanceDir(n) {
			t.Errorf("folder %q taken for vmdock's", n)
		}
	}
}

func TestIsInstanceFile(t *testing.T) {
	for _, n := range []string{
		// the drivers' files, named in vm/driver
		"qmp.sock", "qemu.pid", "qemu.log", "efi-vars.fd", "vz-mac", "vz-machine-id",
		"virtiofs-0.sock", "virtiofs-12.sock", "virtiofsd-3.pid",
		// the image pin, from package images
		"image.digest",
		// rotated logs
		"qemu.log.1", "serial.log.1", "guestagent.log.1",
		// atomic writes in flight: <name>.tmp, .<name>.*, .<stem>-*.<ext>
		"spec.json.tmp", "data.runtime.tmp", ".image.digest.123", ".vz-mac.x", ".disk-77.raw", ".state-1.json",
	} {
		if !IsInstanceFile(n) {
			t.Errorf("%s: not recognised as vmdock's", n)
		}
	}
	for _, n := range []string{
		"", "notes.txt", "Vmdock.yaml", "image.digest~", "qemu.pid.1", "efi-vars.fd.1", "broken.1",
		"virtiofs-0.pid", "virtiofsd-0.sock", "virtiofs-.sock.bak", "disk-77.raw", ".disk-77.qcow2",
		"spec.tmp", "sync", "state",
	} {
		if IsInstanceFile(n) {
			t.Errorf("%s: taken for vmdock's", n)
		}
	}
}

func TestDataRuntime(t *testing.T) {
	inst := &Instance{Name: "x", Dir: t.TempDir()}
	if rt, ok := inst.DataRuntime(); ok || rt != "" {
		t.Fatalf("no data disk: DataRuntime = %q, %v; want none", rt, ok)
	}
	if err := inst.RecordDataRuntime("containerd"); err != nil {
		t.Fatal(err)
	}
	if rt, ok := inst.DataRuntime(); !ok || rt != "containerd" {
		t.Fatalf("after the record: %q, %v", rt, ok)
	}
	// The first record stays: the data disk holds that runtime's state.
	if err := inst.RecordDataRuntime("docker"); err != nil {
		t.Fatal(err)
	}
	if rt, _ := inst.DataRuntime(); rt != "containerd" {
		t.Fatalf("a second record replaced the first: %q", rt)
	}
	if b, err := os.ReadFile(inst.DataRuntimePath()); err != nil || string(b) != "containerd\n" {
		t.Fatalf("data.runtime = %q, %v", b, err)
	}
	fi, err := os.Stat(inst.DataRuntimePath())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("data.runtime mode %v, %v", fi.Mode(), err)
	}
}

// A data disk made before the record was kept holds docker's state, the
// only runtime then; recording another runtime over it changes nothing.
func TestDataRuntimeOfAnOldDataDisk(t *testing.T) {
	inst := &Instance{Name: "x", Dir: t.TempDir()}
	if err := os.WriteFile(inst.DataDiskPath(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if rt, ok := inst.DataRuntime(); !ok || rt != "docker" {
		t.Fatalf("old data disk: %q, %v; want docker", rt, ok)
	}
	if err := inst.RecordDataRuntime("containerd"); err != nil {
		t.Fatal(err)
	}
	if rt, _ := inst.DataRuntime(); rt != "docker" {
		t.Fatalf("record over an old data disk: %q, want docker", rt)
	}
	if _, err := os.Stat(inst.DataRuntimePath()); !os.IsNotExist(err) {
		t.Fatalf("a record was written for an old data disk: %v", err)
	}
	// An empty record is none: the data disk decides.
	if err := os.WriteFile(inst.DataRuntimePath(), []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if rt, ok := inst.DataRuntime(); !ok || rt != "docker" {
		t.Fatalf("empty record with a data disk: %q, %v", rt, ok)
	}
}

func TestRecordDataRuntimeError(t *testing.T) {
	inst := &Instance{Name: "x", Dir: filepath.Join(t.TempDir(), "missing")}
	if err := inst.RecordDataRuntime("docker"); err == nil {
		t.Fatal("record in a missing folder: want an error")
	}
}

func TestPinnedImage(t *testing.T) {
	inst := &Instance{Name: "x", Dir: t.TempDir()}
	if got := inst.PinnedImage(); got != "" {
		t.Fatalf("before the first start: %q", got)
	}
	if err := os.WriteFile(filepath.Join(inst.Dir, "image.digest"), []byte("sha256:abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := inst.PinnedImage(); got != "sha256:abc" {
		t.Fatalf("PinnedImage = %q", got)
	}
}

func TestMigrateRecordPathIsInTheInstanceFolder(t *testing.T) {
	inst, err := Open("/h", "dev")
	if err != nil {
		t.Fatal(err)
	}
	if got := inst.MigrateRecordPath(); got != "/h/dev/migrate.json" {
		t.Errorf("MigrateRecordPath = %q", got)
	}
}

// The stack an instance ran: none before it booted, its VM type's own for
// one that booted before the record was kept, else the record, which each
// boot rewrites; LoadConfig gives a config naming none that stack.
func TestNetHistory(t *testing.T) {
	inst := &Instance{Name: "x", Dir: t.TempDir()}
	if err := os.WriteFile(inst.ConfigPath(), []byte("cpus: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stack := func() string {
		t.Helper()
		c, err := inst.LoadConfig(config.Host{OS: "linux", Arch: "amd64"})
		if err != nil {
			t.Fatal(err)
		}
		return c.Network.Stack
	}
	if got := inst.NetHistory(); got != (config.NetHistory{}) {
		t.Fatalf("never booted: %+v, want none", got)
	}
	if got := stack(); got != "gvisor" {
		t.Errorf("never booted: loaded stack %q, want the default gvisor", got)
	}
	if err := os.WriteFile(inst.DiskPath(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := stack(); got != "slirp" {
		t.Errorf("qemu instance without a record: %q, want slirp", got)
	}
	if got := inst.NetHistory().Stack("vz"); got != "vznat" {
		t.Errorf("vz instance without a record: %q, want vznat", got)
	}
	for _, want := range []string{"gvisor", "slirp"} {
		if err := inst.RecordNetStack(want); err != nil {
			t.Fatal(err)
		}
		if got := stack(); got != want {
			t.Errorf("after recording %s: %q", want, got)
		}
	}
	if !IsInstanceFile(filepath.Base(inst.NetStackPath())) {
		t.Errorf("%s is not an instance file: delete would leave it", inst.NetStackPath())
	}
}

func TestDockerContext(t *testing.T) {
	inst, _ := Open("/h", "dev")
	p := inst.DockerContext()
	if p.Name != "dev" || p.Socket != "/h/dev/docker.sock" || p.StatePath != "/h/dev/state.json" {
		t.Fatalf("DockerContext = %+v", p)
	}
}

// A remote instance's name on its server is made once and kept: its sync
// state there is found by it, and delete removes that folder by it.
func TestRemoteKeyIsMadeOnceAndKept(t *testing.T) {
	inst := &Instance{Name: "big", Dir: t.TempDir()}
	if _, ok := inst.RecordedRemoteKey(); ok {
		t.Fatal("a new instance has a name on a server")
	}
	key, err := inst.RemoteKey()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^big-[0-9a-f]{12}$`).MatchString(key) {
		t.Errorf("key %q; want the profile and 12 hex digits", key)
	}
	again, err := inst.RemoteKey()
	if recorded, ok := inst.RecordedRemoteKey(); err != nil || again != key || !ok || recorded != key {
		t.Errorf("second call %q (%v), recorded %q %v; want %q kept", again, err, recorded, ok, key)
	}
	other := &Instance{Name: "big", Dir: t.TempDir()}
	if k, _ := other.RemoteKey(); k == key {
		t.Errorf("two instances of one profile name share the key %q", key)
	}
}
