package vm

import "path/filepath"

// Instance is one profile's folder under $VMDOCK_HOME. Every file vmdock
// keeps for an instance has its path method here, so no other code
// builds these names by hand.
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
func (i *Instance) SerialLogPath() string     { return i.path("serial.log") }
func (i *Instance) HostAgentLogPath() string  { return i.path("hostagent.log") }
func (i *Instance) GuestAgentLogPath() string { return i.path("guestagent.log") }
func (i *Instance) StatePath() string         { return i.path("state.json") }

// SpecPath holds the driver.Spec the host agent last booted: what exactly
// ran, for debugging and for the bench's raw-boot baseline.
func (i *Instance) SpecPath() string { return i.path("spec.json") }

// BrokenPath records why the last host agent ended abnormally (the VM died
// under it); `status` reports it until the next start.
func (i *Instance) BrokenPath() string { return i.path("broken") }
