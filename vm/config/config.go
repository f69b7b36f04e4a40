package config

import (
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/network/proxy"
)

// Config is one instance's configuration: Default fills it, the YAML
// file at <home>/<profile>/vmdock.yaml overrides the defaults, and flags
// given to `vmdock start` override the file (and are saved back).
type Config struct {
	Arch      string            `yaml:"arch" json:"arch"`           // amd64 | arm64 (host arch by default)
	VMType    string            `yaml:"vmType" json:"vmType"`       // vz | qemu
	Accel     string            `yaml:"accel" json:"accel"`         // auto | kvm | hvf | tcg (qemu)
	CPUs      int               `yaml:"cpus" json:"cpus"`           // 1..host cores
	MemoryGiB float64           `yaml:"memory" json:"memory"`       // GiB
	DiskGiB   int               `yaml:"disk" json:"disk"`           // GiB, grow only
	Runtime   string            `yaml:"runtime" json:"runtime"`     // docker | containerd
	MountType string            `yaml:"mountType" json:"mountType"` // virtiofs | 9p
	Mounts    []Mount           `yaml:"mounts" json:"mounts"`       // default: home folder, writable
	VZRosetta bool              `yaml:"vzRosetta" json:"vzRosetta"` // vz on arm64 only
	Binfmt    bool              `yaml:"binfmt" json:"binfmt"`       // qemu-user binfmt for foreign-arch containers
	DiskSync  string            `yaml:"diskSync" json:"diskSync"`   // full | fsync | none
	Network   NetworkConfig     `yaml:"network" json:"network"`     //
	Env       map[string]string `yaml:"env" json:"env"`             // guest environment
	Image     string            `yaml:"image" json:"image"`         // catalog name, path or URL; empty: the default for Arch
	// ImageBaseURL is where published images are (images.json and the
	// archives), for the default image; "" for this build's default.
	ImageBaseURL string      `yaml:"imageBaseURL,omitempty" json:"imageBaseURL,omitempty"`
	Activate     bool        `yaml:"activate" json:"activate"`       // switch the docker context on start
	Resume       bool        `yaml:"resume" json:"resume"`           // stop saves the running VM, start resumes it
	PortForward  PortForward `yaml:"portForward" json:"portForward"` //

	// Domains is the router for http(s)://<name>.vmdock.localhost.
	Domains DomainsConfig `yaml:"domains" json:"domains"`

	// SSHAgent offers the host's SSH agent (SSH_AUTH_SOCK at start) to
	// containers at /run/host-services/ssh-auth.sock. Left out: on when
	// SSH_AUTH_SOCK is set, decided again at every start.
	SSHAgent *bool `yaml:"sshAgent,omitempty" json:"sshAgent,omitempty"`

	// HostCACerts: the guest trusts the CA certificates the host added to
	// its own trust store (a TLS-inspecting proxy's, a company CA); CACerts
	// are PEM files it trusts as well.
	HostCACerts bool     `yaml:"hostCACerts" json:"hostCACerts"`
	CACerts     []string `yaml:"caCerts,omitempty" json:"caCerts,omitempty"`
	// Proxy is what the guest's daemons use; empty: the host's at start
	// (HTTP_PROXY and friends, else macOS's system settings).
	Proxy proxy.Settings `yaml:"proxy,omitempty" json:"proxy,omitempty"`

	// Idle is how long the VM may go unused (no container, connection or
	// session) before it pauses; the next use wakes it. 0: never.
	Idle Duration `yaml:"idle" json:"idle"`

	// VZNested lets the guest run KVM itself (nested virtualization): vz on
	// macOS 15+ with an M3 or newer chip; off by default.
	VZNested bool `yaml:"vzNestedVirtualization" json:"vzNestedVirtualization"`

	// Remote, when set, runs no VM: the engine is a Linux server's own,
	// reached over ssh (see Remote).
	Remote *Remote `yaml:"remote,omitempty" json:"remote,omitempty"`
	// Sandbox, when set, makes the instance a sandbox (see SandboxConfig).
	Sandbox *SandboxConfig `yaml:"sandbox,omitempty" json:"sandbox,omitempty"`
}

// Mount is one host folder shared into the guest (see package mounts).
type Mount = mounts.Mount

// NetworkConfig is the guest's network and the host-side addresses.
type NetworkConfig struct {
	Mode            string   `yaml:"mode" json:"mode"`                       // user | isolated
	Stack           string   `yaml:"stack" json:"stack"`                     // slirp (qemu) | vznat (vz) | gvisor
	DNS             []string `yaml:"dns" json:"dns"`                         // guest resolvers; empty: the VM network's
	PortBind        string   `yaml:"portBind" json:"portBind"`               // host address forwarded ports bind to
	LoopbackAlias   bool     `yaml:"loopbackAlias" json:"loopbackAlias"`     // put LoopbackAliasIP on the host's loopback
	LoopbackAliasIP string   `yaml:"loopbackAliasIP" json:"loopbackAliasIP"` // 10.254.254.254
	HostAccessIP    string   `yaml:"hostAccessIP" json:"hostAccessIP"`       // guest address tunnelled to the host's loopback
}

// PortForward rules for automatic forwarding of guest listeners.
type PortForward struct {
	Rules  []PortRule `yaml:"rules" json:"rules"`   // explicit guest->host maps and ranges
	Ignore []string   `yaml:"ignore" json:"ignore"` // guest ports or ranges never forwarded, e.g. "22", "6000-6010"
}

// PortRule maps a guest port (or range) to a host port (or range of the
// same length). Proto is tcp, udp or empty for both.
type PortRule struct {
	Guest string `yaml:"guest" json:"guest"` // "8080" or "8000-8010"
	Host  string `yaml:"host" json:"host"`   // same shape as Guest
	Proto string `yaml:"proto,omitempty" json:"proto,omitempty"`
}
