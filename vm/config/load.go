package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/internal/fsutil"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
)

// Container runtimes: dockerd with a docker context, or containerd with
// nerdctl (`vmdock nerdctl`) and its socket tunnelled to the host.
const (
	RuntimeDocker     = "docker"
	RuntimeContainerd = "containerd"
)

// Defaults that are not host-dependent.
const (
	DefaultCPUs            = 2
	DefaultMemoryGiB       = 2
	DefaultDiskGiB         = 60
	DefaultRuntime         = RuntimeDocker
	DefaultPortBind        = "127.0.0.1"
	DefaultLoopbackAliasIP = "10.254.254.254"
	DefaultHostAccessIP    = "10.254.254.254"
)

// Default is the configuration of a new instance on host h: the
// host's arch, the best VM type and mount type it offers, the home folder
// shared writable. It only reads h, so the same h gives the same config.
func Default(h Host) Config {
	c := Config{
		Arch:      h.Arch,
		VMType:    h.DefaultVMType(),
		Accel:     driver.AccelAuto,
		CPUs:      min(DefaultCPUs, max(h.CPUs, 1)),
		MemoryGiB: DefaultMemoryGiB,
		DiskGiB:   DefaultDiskGiB,
		Runtime:   DefaultRuntime,
		Mounts:    []Mount{{Location: "~", Writable: true}},
		Binfmt:    true,
		DiskSync:  driver.DiskSyncFsync,
		Network: NetworkConfig{
			Mode:            driver.NetworkUser,
			PortBind:        DefaultPortBind,
			LoopbackAliasIP: DefaultLoopbackAliasIP,
			HostAccessIP:    DefaultHostAccessIP,
		},
		Activate:    true,
		Resume:      true,
		Idle:        DefaultIdle,
		HostCACerts: true,
		Domains:     DefaultDomains(),
	}
	c.FillDefaults(h)
	return c
}

// FillDefaults sets what was left empty and follows from the host and the
// VM type: the mount type. This is the one place the default mount type
// is chosen, so a config that names only its vmType (a file, or
// `start --vm-type` on a new instance) gets the mount type that suits it.
func (c *Config) FillDefaults(h Host) {
	if c.MountType == "" {
		c.MountType = h.DefaultMountType(c.VMType)
	}
	if c.Network.Stack == "" {
		c.Network.Stack = NetHistory{}.Stack(c.VMType)
	}
	c.applyRemote()
	c.applySandbox()
}

// DefaultNetworkStack is a new instance's network on either VM type: the
// host agent's own stack, whose outbound connections are the host's and so
// follow its VPN routes and DNS. An existing instance keeps the one it ran
// (NetHistory.Stack).
func DefaultNetworkStack(string) string { return driver.NetStackGvisor }

// NetHistory is what an instance's folder says of the network stack it
// ran. The zero value is an instance that never booted.
type NetHistory struct {
	Recorded string // the stack its last boot recorded; "" when none did
	Booted   bool   // it has a root disk, so it booted, maybe before boots recorded their stack
}

// Stack is the network stack of a config of vmType that names none: the
// one place this is decided, so a new default never moves an existing
// instance to another network. It is the stack the instance last ran;
// for one that booted before the record was kept, vmType's own (then the
// only choice); for one that never booted, the default.
func (n NetHistory) Stack(vmType string) string {
	switch {
	case n.Recorded != "":
		return n.Recorded
	case n.Booted:
		return driver.OwnNetStack(vmType)
	}
	return DefaultNetworkStack(vmType)
}

// MaxBytes caps what is read of a config or template: a real one is
// a few KiB, and reading a huge file whole would cost its size many times
// over in memory before the YAML parser refused it.
const MaxBytes = 1 << 20

// Load reads a YAML config over the defaults for h. Unknown keys
// are errors, so a typo is not silently ignored. A missing file returns an
// error matching os.ErrNotExist.
func Load(path string, h Host) (Config, error) {
	b, err := Read(path)
	if err != nil {
		return Config{}, err
	}
	c, err := Parse(b, h)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Read returns the bytes of a config or template file, refusing
// one larger than MaxBytes without reading past that.
func Read(path string) ([]byte, error) {
	b, err := fsutil.ReadFileMax(path, MaxBytes)
	var big *fsutil.TooLargeError
	switch {
	case errors.As(err, &big):
		return nil, fmt.Errorf("config %s: larger than %d KiB is not accepted; accepted: a YAML file up to %d KiB", path, MaxBytes>>10, MaxBytes>>10)
	case err != nil:
		return nil, fmt.Errorf("read config: %w", err)
	}
	return b, nil
}

// LoadInstance reads an instance's saved config like Load, except that a
// config without network.stack gets the stack ran says the instance ran.
// Callers go through store.Instance.LoadConfig, which reads ran from the
// instance folder.
func LoadInstance(path string, h Host, ran NetHistory) (Config, error) {
	b, err := Read(path)
	if err != nil {
		return Config{}, err
	}
	c, err := parse(b, h, ran)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML over the defaults for h. A file that names a
// vmType but no mountType gets the mount type that suits that vmType.
func Parse(b []byte, h Host) (Config, error) { return parse(b, h, NetHistory{}) }

func parse(b []byte, h Host, ran NetHistory) (Config, error) {
	c := Default(h)
	c.MountType = ""
	c.Network.Stack = ""
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("invalid YAML: %s", oneLine(err.Error()))
	}
	if err := noSecondDocument(dec); err != nil {
		return Config{}, err
	}
	if err := checkWholeNumbers(b); err != nil {
		return Config{}, err
	}
	if c.Network.Stack == "" {
		c.Network.Stack = ran.Stack(c.VMType)
	}
	if c.Remote != nil && !namesKey(b, "mounts") {
		c.Mounts = nil // a server gets no folder unasked, never the whole home
	}
	c.FillDefaults(h)
	return c, nil
}

// namesKey says whether the YAML document b sets key at its top level.
func namesKey(b []byte, key string) bool {
	var top map[string]yaml.Node
	if err := yaml.Unmarshal(b, &top); err != nil {
		return false
	}
	_, ok := top[key]
	return ok
}

// noSecondDocument refuses settings after a "---" that starts another
// document: only the first document is used, so they would be silently
// ignored. Empty documents (a trailing "---") carry nothing and pass.
func noSecondDocument(dec *yaml.Decoder) error {
	for {
		var extra yaml.Node
		switch err := dec.Decode(&extra); {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("invalid YAML: %s", oneLine(err.Error()))
		}
		if !emptyDocument(&extra) {
			return fmt.Errorf("a second YAML document (from line %d) is not accepted; accepted: one document (remove the '---' line or merge the settings)", extra.Line)
		}
	}
}

func emptyDocument(n *yaml.Node) bool {
	if len(n.Content) == 0 {
		return true
	}
	c := n.Content[0]
	return len(n.Content) == 1 && c.Kind == yaml.ScalarNode && c.Tag == "!!null" && c.Value == ""
}

// Marshal renders c as YAML, the form Save writes.
func (c Config) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return buf.Bytes(), nil
}

// Save writes c to path atomically, mode 0600.
func (c Config) Save(path string) error {
	b, err := c.Marshal()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	return nil
}

// Normalize expands ~ in mount paths and fills each mount's guest path, so
// the saved config and the driver see absolute paths. It never fails:
// Validate reports what is still wrong.
func (c *Config) Normalize() {
	home, _ := os.UserHomeDir()
	c.Mounts = mounts.Resolve(c.Mounts, home)
}

func oneLine(s string) string { return string(bytes.Join(bytes.Fields([]byte(s)), []byte(" "))) }
