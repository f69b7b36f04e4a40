package config

import (
	"fmt"
	"path"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/remote"
)

// Remote makes the instance's engine a Linux server's own Docker engine,
// reached over ssh; no VM runs.
type Remote struct {
	// URL is ssh://[user@]host[:port]; ssh's own config applies to it.
	URL string `yaml:"url" json:"url"`
	// Socket is the engine's socket on the server (a rootless engine's
	// /run/user/UID/docker.sock, say).
	Socket string `yaml:"socket" json:"socket"`
	// HostPorts are the laptop's loopback ports containers on the server
	// reach at the docker bridge gateway (an IDE's debugger port).
	HostPorts []int `yaml:"hostPorts" json:"hostPorts"`
}

// Remote's defaults.
const DefaultRemoteSocket = "/var/run/docker.sock"

// DefaultRemoteHostPorts is xdebug's port.
var DefaultRemoteHostPorts = []int{9003}

// IsRemote says the instance runs on a server, not in a VM.
func (c Config) IsRemote() bool { return c.Remote != nil }

// applyRemote makes every folder of a remote instance a sync mount, two
// ways, whatever the file or the flags said (-V's default is read-only):
// a server has no share device, its engine binds the synced folder at
// the same path, and what containers write there comes back. The share
// settings (type, cache, inotify) mean nothing on a server and go.
func (c *Config) applyRemote() {
	if c.Remote == nil {
		return
	}
	c.Remote.fillDefaults()
	for i := range c.Mounts {
		m := &c.Mounts[i]
		m.Mode, m.Writable = mounts.ModeSync, true
		m.Type, m.Cache, m.Inotify = "", "", nil
	}
}

func (r *Remote) fillDefaults() {
	if r.Socket == "" {
		r.Socket = DefaultRemoteSocket
	}
	if r.HostPorts == nil {
		r.HostPorts = append([]int(nil), DefaultRemoteHostPorts...)
	}
}

func (c Config) validateRemote() []error {
	r := c.Remote
	if r == nil {
		return nil
	}
	var p problems
	if c.Runtime != RuntimeDocker {
		p.bad("runtime", c.Runtime, "%q on a remote instance (the server's own Docker engine)", RuntimeDocker)
	}
	if _, err := remote.ParseURL(r.URL); err != nil {
		p = append(p, fmt.Errorf("remote.url: %w", err))
	}
	if !path.IsAbs(r.Socket) || path.Clean(r.Socket) != r.Socket {
		p.bad("remote.socket", r.Socket, "an absolute clean path on the server such as %s", DefaultRemoteSocket)
	}
	seen := map[int]bool{}
	for _, port := range r.HostPorts {
		if port < 1 || port > 65535 {
			p.bad("remote.hostPorts", port, "ports 1-65535")
		} else if seen[port] {
			p.bad("remote.hostPorts", port, "each port once")
		}
		seen[port] = true
	}
	return p
}
