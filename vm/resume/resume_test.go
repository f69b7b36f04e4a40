package resume

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/driver"
)

func baseFingerprint(t *testing.T, dir string) Fingerprint {
	t.Helper()
	disk := filepath.Join(dir, "data.raw")
	if _, err := os.Stat(disk); err != nil {
		if err := os.WriteFile(disk, make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return Fingerprint{
		Vmdock: "1.2.3", Agent: "sha256:aaaa", Image: "sha256:bbbb", Driver: "qemu",
		Arch: "amd64", CPUs: 2, MemoryMiB: 2048, DiskGiB: 60, Network: "isolated", DiskSync: "fsync",
		Runtime: "docker", Mounts: `{"Shares":null}`, Spec: "cccc", Disks: MarkDisks(disk),
	}
}

// save writes a state file and its record as a driver and the host agent
// would.
func save(t *testing.T, dir string, fp Fingerprint, content []byte) *Saved {
	t.Helper()
	var buf bytes.Buffer
	hw := &HashingWriter{W: &buf}
	hw.Write(content)
	if err := os.WriteFile(StatePath(dir), buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Saved{Fingerprint: fp, State: driver.SavedState{Format: "test", Size: hw.Size(), SHA256: hw.SHA256()}, At: time.Now(), Took: time.Second}
	if err := s.Write(dir); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDecideResumesAMatchingState(t *testing.T) {
	dir := t.TempDir()
	fp := baseFingerprint(t, dir)
	saved := save(t, dir, fp, []byte("guest memory"))
	got, why := Decide(dir, baseFingerprint(t, dir))
	if got == nil || why != "" {
		t.Fatalf("Decide = %v, %q; want the saved state", got, why)
	}
	if !reflect.DeepEqual(got.State, saved.State) {
		t.Errorf("state %+v, want %+v", got.State, saved.State)
	}
}

func TestDecideWithoutState(t *testing.T) {
	got, why := Decide(filepath.Join(t.TempDir(), "state"), Fingerprint{})
	if got != nil || why != "" {
		t.Fatalf("Decide = %v, %q; want nothing and no reason", got, why)
	}
}

// Every field of the fingerprint on its own sends the start to a cold
// boot, with a reason naming it.
func TestDecideRefusesEachFingerprintChange(t *testing.T) {
	changes := map[string]func(*Fingerprint){
		"vmdock version":      func(f *Fingerprint) { f.Vmdock = "1.2.4" },
		"guest agent":         func(f *Fingerprint) { f.Agent = "sha256:ffff" },
		"image":               func(f *Fingerprint) { f.Image = "sha256:eeee" },
		"vmType":              func(f *Fingerprint) { f.Driver = "vz" },
		"arch":                func(f *Fingerprint) { f.Arch = "arm64" },
		"cpus":                func(f *Fingerprint) { f.CPUs = 3 },
		"memory":              func(f *Fingerprint) { f.MemoryMiB = 4096 },
		"disk (GiB)":          func(f *Fingerprint) { f.DiskGiB = 80 },
		"network mode":        func(f *Fingerprint) { f.Network = "user" },
		"diskSync":            func(f *Fingerprint) { f.DiskSync = "none" },
		"runtime":             func(f *Fingerprint) { f.Runtime = "containerd" },
		"mounts":              func(f *Fingerprint) { f.Mounts = `{"Shares":[{}]}` },
		"devices":             func(f *Fingerprint) { f.Spec = "dddd" },
		"disks":               func(f *Fingerprint) { f.Disks = nil },
		"was changed after":   func(f *Fingerprint) { f.Disks[0].ModNs++ },
		"replaced":            func(f *Fingerprint) { f.Disks[0].Path += "2" },
		"is gone":             func(f *Fingerprint) { f.Disks[0].Size = -1 },
		"inode":               func(f *Fingerprint) { f.Disks[0].Inode++ },
		"change time (ctime)": func(f *Fingerprint) { f.Disks[0].ChangeNs++ },
	}
	want := map[string]string{"inode": "was changed after", "change time (ctime)": "was changed after", "memory": "memory (MiB)"}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			fp := baseFingerprint(t, dir)
			save(t, dir, fp, []byte("state"))
			now := baseFingerprint(t, dir)
			now.Disks = append([]DiskMark(nil), now.Disks...)
			change(&now)
			got, why := Decide(dir, now)
			if got != nil {
				t.Fatal("a changed fingerprint was resumed")
			}
			w := name
			if x, ok := want[name]; ok {
				w = x
			}
			if !strings.Contains(why, w) {
				t.Errorf("reason %q does not name %q", why, w)
			}
		})
	}
}

// A disk written after the save (another boot, a restored backup) is
// caught by its marks, not by a field someone remembered to compare.
func TestDecideRefusesADiskWrittenAfterTheSave(t *testing.T) {
	dir := t.TempDir()
	fp := baseFingerprint(t, dir)
	save(t, dir, fp, []byte("state"))
	time.Sleep(10 * time.Millisecond)
	f, err := os.OpenFile(filepath.Join(dir, "data.raw"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{1}, 100) // same size
	f.Close()
	if got, why := Decide(dir, baseFingerprint(t, dir)); got != nil || !strings.Contains(why, "was changed after the save") {
		t.Fatalf("Decide = %v, %q", got, why)
	}
}

func TestDecideRefusesDamagedStateFiles(t *testing.T) {
	cases := map[string]struct {
		damage func(path string)
		want   string
	}{
		"truncated": {func(p string) { os.Truncate(p, 5) }, "truncated"},
		"flipped byte": {func(p string) {
			b, _ := os.ReadFile(p)
			b[3] ^= 0xff
			os.WriteFile(p, b, 0o600)
		}, "checksum"},
		"missing": {func(p string) { os.Remove(p) }, "unreadable"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			fp := baseFingerprint(t, dir)
			save(t, dir, fp, []byte("guest memory pages"))
			c.damage(StatePath(dir))
			got, why := Decide(dir, baseFingerprint(t, dir))
			if got != nil || !strings.Contains(why, c.want) {
				t.Fatalf("Decide = %v, %q; want a reason with %q", got, why, c.want)
			}
		})
	}
}

func TestDecideRefusesAGarbledRecord(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, recordFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, why := Decide(dir, Fingerprint{}); got != nil || !strings.Contains(why, "record") {
		t.Fatalf("Decide = %v, %q", got, why)
	}
}

func TestRemoveAndExists(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	os.Mkdir(dir, 0o700)
	if Exists(dir) {
		t.Fatal("an empty folder is no saved state")
	}
	save(t, dir, Fingerprint{}, []byte("x"))
	if !Exists(dir) {
		t.Fatal("saved state not found")
	}
	if err := Remove(dir); err != nil || Exists(dir) {
		t.Fatalf("Remove: %v, exists %v", err, Exists(dir))
	}
	if err := Remove(dir); err != nil {
		t.Fatalf("Remove of nothing: %v", err)
	}
}
