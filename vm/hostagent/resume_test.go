package hostagent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent/agentbin"
	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/resume"
	"github.com/vmdock/vmdock/vm/store"
)

// resumeAgent is a host agent after its image step, with disks and a
// guest agent binary in place, for the saved-state decision.
func resumeAgent(t *testing.T) *hostAgent {
	t.Helper()
	dir := t.TempDir()
	agentFile := filepath.Join(dir, "agent-bin")
	must(t, os.WriteFile(agentFile, []byte("guest agent v1"), 0o600))
	t.Setenv(agentbin.OverrideEnv, agentFile)
	inst := &store.Instance{Name: "default", Dir: dir}
	for _, p := range []string{inst.DiskPath(), inst.DataDiskPath()} {
		must(t, os.WriteFile(p, make([]byte, 8192), 0o600))
	}
	cfg := config.Config{Arch: "amd64", VMType: "qemu", CPUs: 2, MemoryGiB: 2, DiskGiB: 60, Runtime: "docker", Resume: true, Network: config.NetworkConfig{Mode: "isolated"}}
	ha := &hostAgent{inst: inst, cfg: cfg, events: control.NewEventLog(), boot: bootResults{img: &images.Image{Digest: "sha256:1111"}}}
	ha.boot.spec = driver.Spec{Name: "default", Dir: dir, Arch: "amd64", CPUs: 2, MemoryMiB: 2048, Network: "isolated"}
	return ha
}

// saveFor records a saved state matching ha as it is now.
func saveFor(t *testing.T, ha *hostAgent) {
	t.Helper()
	dir := ha.inst.SavedStateDir()
	must(t, os.MkdirAll(dir, 0o700))
	content := []byte("vm state")
	must(t, os.WriteFile(resume.StatePath(dir), content, 0o600))
	hw := &resume.HashingWriter{W: new(strings.Builder)}
	hw.Write(content)
	fp, err := ha.fingerprint()
	must(t, err)
	must(t, (&resume.Saved{Fingerprint: fp, State: driver.SavedState{Format: "test", Size: hw.Size(), SHA256: hw.SHA256()}, At: time.Now()}).Write(dir))
}

func notes(ha *hostAgent) string {
	past, _, stop := ha.events.Follow()
	stop()
	var b strings.Builder
	for _, ev := range past {
		if ev.State == control.EventNote {
			b.WriteString(ev.Detail + "\n")
		}
	}
	return b.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSavedStateResumesWhenEverythingMatches(t *testing.T) {
	ha := resumeAgent(t)
	saveFor(t, ha)
	must(t, ha.stepSavedState(context.Background()))
	if ha.boot.resumeFrom == nil {
		t.Fatalf("not resumed; notes:\n%s", notes(ha))
	}
	if !strings.Contains(notes(ha), "resuming the VM saved") {
		t.Errorf("no resume note:\n%s", notes(ha))
	}
	// The resumed boot skips the steps that would change the disks.
	before, _ := os.Stat(ha.inst.DataDiskPath())
	must(t, ha.stepDisks(context.Background()))
	must(t, ha.stepBootDisk(context.Background()))
	after, _ := os.Stat(ha.inst.DataDiskPath())
	if !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Error("a resuming start touched the data disk")
	}
	if _, err := os.Stat(ha.inst.BootDiskPath()); err == nil {
		t.Error("a resuming start rewrote the boot disk")
	}
}

// Each change between save and start boots cold, says why in one line,
// and drops the state.
func TestSavedStateBootsColdOnAnyChange(t *testing.T) {
	changes := map[string]struct {
		change func(t *testing.T, ha *hostAgent)
		want   string
	}{
		"cpus":      {func(_ *testing.T, ha *hostAgent) { ha.boot.spec.CPUs = 3 }, "cpus changed since the save (2, now 3)"},
		"memory":    {func(_ *testing.T, ha *hostAgent) { ha.boot.spec.MemoryMiB = 4096 }, "memory (MiB) changed"},
		"disk size": {func(_ *testing.T, ha *hostAgent) { ha.cfg.DiskGiB = 80 }, "disk (GiB) changed"},
		"image":     {func(_ *testing.T, ha *hostAgent) { ha.boot.img.Digest = "sha256:2222" }, "image changed"},
		"guest agent": {func(t *testing.T, ha *hostAgent) {
			must(t, os.WriteFile(os.Getenv(agentbin.OverrideEnv), []byte("v2"), 0o600))
		}, "guest agent changed"},
		"runtime": {func(_ *testing.T, ha *hostAgent) { ha.cfg.Runtime = "containerd" }, "runtime changed"},
		"network": {func(_ *testing.T, ha *hostAgent) { ha.boot.spec.Network = "user" }, "network mode changed"},
		"mounts": {func(_ *testing.T, ha *hostAgent) {
			ha.cfg.Mounts = []config.Mount{{Location: "/tmp", Writable: true, Mode: "sync"}}
		}, "mounts changed"},
		"spec": {func(_ *testing.T, ha *hostAgent) { ha.boot.spec.Cmdline = "quiet" }, "devices or kernel command line changed"},
		"data disk written": {func(t *testing.T, ha *hostAgent) {
			time.Sleep(10 * time.Millisecond)
			f, err := os.OpenFile(ha.inst.DataDiskPath(), os.O_WRONLY, 0)
			must(t, err)
			f.WriteAt([]byte{7}, 10)
			f.Close()
		}, "was changed after the save"},
		"damaged state": {func(t *testing.T, ha *hostAgent) {
			must(t, os.WriteFile(resume.StatePath(ha.inst.SavedStateDir()), []byte("vm stat3"), 0o600))
		}, "checksum"},
		"resume off": {func(_ *testing.T, ha *hostAgent) { ha.cfg.Resume = false }, "resume is off"},
	}
	for name, c := range changes {
		t.Run(name, func(t *testing.T) {
			ha := resumeAgent(t)
			saveFor(t, ha)
			c.change(t, ha)
			must(t, ha.stepSavedState(context.Background()))
			if ha.boot.resumeFrom != nil {
				t.Fatal("resumed a state that no longer matches")
			}
			n := notes(ha)
			if !strings.Contains(n, c.want) || !strings.Contains(n, "booting cold") || strings.Count(n, "\n") != 1 {
				t.Errorf("note %q, want one line with %q and \"booting cold\"", n, c.want)
			}
			if _, err := os.Stat(ha.inst.SavedStateDir()); err == nil {
				t.Error("the state is kept after a cold boot decision")
			}
		})
	}
}
