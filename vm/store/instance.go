package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmdock/vmdock/dockerhost/dockerctx"
	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/logfile"
)

// Instance is one profile's folder under $VMDOCK_HOME. Every file vmdock
// keeps for an instance has its path method here; the drivers' own files
// (QMP socket, virtiofsd sockets and pids, EFI vars) are named once in
// vm/driver, which both the drivers and this package read.
type Instance struct {
	Name string // profile name
	Dir  string // <home>/<profile>, mode 0700
}

func (i *Instance) path(name string) string { return filepath.Join(i.Dir, name) }

func (i *Instance) ConfigPath() string        { return i.path("vmdock.yaml") }
func (i *Instance) LockPath() string          { return i.path("lock") }
func (i *Instance) DiskPath() string          { return i.path("disk.raw") }
func (i *Instance) DataDiskPath() string      { return i.path("data.raw") }
func (i *Instance) BootDiskPath() string      { return i.path("boot.iso") }
func (i *Instance) AgentSocketPath() string   { return i.path("agent.sock") }
func (i *Instance) ControlSocketPath() string { return i.path("ha.sock") }
func (i *Instance) PIDPath() string           { return i.path("ha.pid") }
func (i *Instance) DockerSocketPath() string  { return i.path("docker.sock") }

// ContainerdSocketPath is the containerd runtime's socket on the host,
// tunnelled to the guest's containerd.
func (i *Instance) ContainerdSocketPath() string { return i.path("containerd.sock") }

func (i *Instance) SerialLogPath() string     { return i.path("serial.log") }
func (i *Instance) HostAgentLogPath() string  { return i.path("hostagent.log") }
func (i *Instance) GuestAgentLogPath() string { return i.path("guestagent.log") }
func (i *Instance) StatePath() string         { return i.path("state.json") }

// FormatPath records the instance folder's format and the vmdock that
// wrote it (package vm/layout).
func (i *Instance) FormatPath() string { return i.path("format") }

// SavedStateDir holds the VM state `stop` saved for the next start to
// resume (package resume); a folder.
func (i *Instance) SavedStateDir() string { return i.path(savedStateDir) }

// DockerContext is the instance's docker context, with the file that
// remembers the context it replaced.
func (i *Instance) DockerContext() dockerctx.Profile {
	return dockerctx.Profile{Name: i.Name, Socket: i.DockerSocketPath(), StatePath: i.StatePath()}
}

// SyncDataPath is the sync engine's folder (sessions and sync history of
// the sync mounts); a folder, unlike the other paths.
func (i *Instance) SyncDataPath() string { return i.path(syncDataDir) }

const (
	syncDataDir   = "sync"
	savedStateDir = "state"
)

// IsInstanceDir reports whether name is a folder vmdock makes in an
// instance folder; `delete` removes it with its contents.
func IsInstanceDir(name string) bool { return name == syncDataDir || name == savedStateDir }

// SpecPath holds the driver.Spec the host agent last booted: what exactly
// ran, for debugging and for the bench's raw-boot baseline.
func (i *Instance) SpecPath() string { return i.path("spec.json") }

// MigrateRecordPath is `vmdock migrate`'s record of the volume copies it
// began and finished, so a run after a cut copies an unfinished one again.
func (i *Instance) MigrateRecordPath() string { return i.path("migrate.json") }

// DataRuntimePath names the container runtime whose state the data disk
// holds; it stays with the data disk (see DataRuntime).
func (i *Instance) DataRuntimePath() string { return i.path("data.runtime") }

// DataRuntime is the runtime the data disk was made for: what
// RecordDataRuntime wrote, else "docker" when a data disk exists (made
// before the record was kept, when docker was the only runtime). ok is
// false when there is no data disk yet.
func (i *Instance) DataRuntime() (runtime string, ok bool) {
	if b, err := os.ReadFile(i.DataRuntimePath()); err == nil {
		if rt := strings.TrimSpace(string(b)); rt != "" {
			return rt, true
		}
	}
	if _, err := os.Stat(i.DataDiskPath()); err == nil {
		return "docker", true
	}
	return "", false
}

// RecordDataRuntime notes runtime for the data disk unless a record exists.
func (i *Instance) RecordDataRuntime(runtime string) error {
	if _, ok := i.DataRuntime(); ok {
		return nil
	}
	if err := atomicfile.WriteFile(i.DataRuntimePath(), []byte(runtime+"\n"), 0o600); err != nil {
		return fmt.Errorf("record the data disk's runtime: %w", err)
	}
	return nil
}

// NetStackPath records the network stack the instance last booted with
// (see NetHistory).
func (i *Instance) NetStackPath() string { return i.path("network.stack") }

// NetHistory is what the folder says of the network stack the instance
// ran: the stack its last boot recorded (RecordNetStack), and whether it
// booted at all (a root disk: one booted before the record was kept).
func (i *Instance) NetHistory() config.NetHistory {
	var n config.NetHistory
	if b, err := os.ReadFile(i.NetStackPath()); err == nil {
		n.Recorded = strings.TrimSpace(string(b))
	}
	if _, err := os.Stat(i.DiskPath()); err == nil {
		n.Booted = true
	}
	return n
}

// LoadConfig is the instance's saved config as a start reads it on host
// h: a config naming no network stack keeps the one the instance ran. A
// missing config returns an error matching os.ErrNotExist.
func (i *Instance) LoadConfig(h config.Host) (config.Config, error) {
	return config.LoadInstance(i.ConfigPath(), h, i.NetHistory())
}

// RecordNetStack notes the network stack a boot runs on.
func (i *Instance) RecordNetStack(stack string) error {
	if err := atomicfile.WriteFile(i.NetStackPath(), []byte(stack+"\n"), 0o600); err != nil {
		return fmt.Errorf("record the network stack: %w", err)
	}
	return nil
}

// UpgradeImagePath marks a start that remakes the root disk from the
// image a fresh instance would get (`start --upgrade-image`); the host
// agent removes it once the new disk is in place.
func (i *Instance) UpgradeImagePath() string { return i.path("upgrade-image") }

// PinnedImage is the digest of the image the instance's root disk was
// made from, "" before its first start.
func (i *Instance) PinnedImage() string {
	b, err := os.ReadFile(i.path(images.DigestFileName))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// BrokenPath records why the last host agent ended abnormally (the VM died
// under it); `status` reports it until the next start.
func (i *Instance) BrokenPath() string { return i.path("broken") }

// instanceFiles are the names vmdock and its drivers create in an instance
// folder; `delete` removes these and nothing else.
var instanceFiles = func() map[string]bool {
	i := &Instance{}
	m := map[string]bool{images.DigestFileName: true}
	for _, p := range []string{
		i.ConfigPath(), i.LockPath(), i.DiskPath(), i.DataDiskPath(), i.BootDiskPath(),
		i.AgentSocketPath(), i.ControlSocketPath(), i.PIDPath(), i.DockerSocketPath(),
		i.ContainerdSocketPath(), i.SerialLogPath(), i.HostAgentLogPath(), i.GuestAgentLogPath(), i.StatePath(),
		i.SpecPath(), i.BrokenPath(), i.DataRuntimePath(), i.UpgradeImagePath(), i.NetStackPath(), i.FormatPath(),
		i.RemoteKeyPath(),
		driver.QMPSocketFile, driver.QEMUPIDFile, driver.QEMULogFile, driver.EFIVarsFile,
		driver.VZMACFile, driver.VZMachineIDFile,
	} {
		m[filepath.Base(p)] = true
	}
	return m
}()

// instancePatterns match the numbered files of the drivers (one per share).
var instancePatterns = []string{driver.VirtiofsSocketFiles, driver.VirtiofsdPIDFiles}

// IsInstanceFile reports whether name is one vmdock makes in an instance
// folder: a known file, a rotated log (.1), a driver's numbered file, or
// a temporary file of an atomic write (<name>.tmp, .<name>.* or
// .<stem>-*.<ext>).
func IsInstanceFile(name string) bool {
	if instanceFiles[name] || instanceFiles[strings.TrimSuffix(name, logfile.OldSuffix)] && strings.HasSuffix(name, ".log"+logfile.OldSuffix) {
		return true
	}
	for _, p := range instancePatterns {
		if ok, _ := filepath.Match(p, name); ok {
			return true
		}
	}
	for known := range instanceFiles {
		stem, _, _ := strings.Cut(known, ".")
		if strings.HasPrefix(name, known+".tmp") ||
			strings.HasPrefix(name, "."+known+".") ||
			strings.HasPrefix(name, "."+stem+"-") && strings.HasSuffix(name, filepath.Ext(known)) {
			return true
		}
	}
	return false
}
