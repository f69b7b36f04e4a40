package config

import (
	"testing"
)

func TestRemoteFromYAMLGetsItsDefaults(t *testing.T) {
	c, err := Parse([]byte("remote:\n  url: ssh://me@build\n"), linuxHost)
	if err != nil {
		t.Fatal(err)
	}
	if !c.IsRemote() || c.Remote.Socket != "/var/run/docker.sock" || len(c.Remote.HostPorts) != 1 || c.Remote.HostPorts[0] != 9003 {
		t.Fatalf("remote = %+v; want the default socket and host port 9003", c.Remote)
	}
	if err := c.ValidateOn(linuxHost); err != nil {
		t.Fatal(err)
	}
	c, err = Parse([]byte("remote:\n  url: ssh://build\n  socket: /run/user/1000/docker.sock\n  hostPorts: []\n"), linuxHost)
	if err != nil {
		t.Fatal(err)
	}
	if c.Remote.Socket != "/run/user/1000/docker.sock" || len(c.Remote.HostPorts) != 0 {
		t.Fatalf("remote = %+v; want the rootless socket and no host port", c.Remote)
	}
}

func TestRemoteBadValues(t *testing.T) {
	cases := map[string]struct {
		remote Remote
		want   []string
	}{
		"scheme":    {Remote{URL: "tcp://build:2375"}, []string{"remote.url", `scheme "tcp" is not supported`, "accepted: ssh://"}},
		"no url":    {Remote{URL: ""}, []string{"remote.url", "accepted: ssh://"}},
		"socket":    {Remote{URL: "ssh://b", Socket: "docker.sock"}, []string{"remote.socket", `"docker.sock"`, "absolute"}},
		"port":      {Remote{URL: "ssh://b", HostPorts: []int{70000}}, []string{"remote.hostPorts", "70000", "1-65535"}},
		"duplicate": {Remote{URL: "ssh://b", HostPorts: []int{9003, 9003}}, []string{"remote.hostPorts", "each port once"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := Default(linuxHost)
			r := tc.remote
			c.Remote = &r
			c.Mounts = nil
			c.FillDefaults(linuxHost)
			oneLineErr(t, c.ValidateOn(linuxHost), tc.want...)
		})
	}
	c := Default(linuxHost)
	c.Remote = &Remote{URL: "ssh://b"}
	c.Runtime = RuntimeContainerd
	c.Mounts = nil
	c.FillDefaults(linuxHost)
	oneLineErr(t, c.ValidateOn(linuxHost), "runtime", "docker")
}

// Every folder of a remote instance is synced both ways to the server,
// whatever -V's mode or the share settings said.
func TestRemoteMountsAreSyncMounts(t *testing.T) {
	dir := t.TempDir()
	yes := true
	c := Default(linuxHost)
	c.Remote = &Remote{URL: "ssh://build"}
	c.Mounts = []Mount{{Location: dir}, {Location: t.TempDir(), GuestPath: "/srv/app", Writable: false, Type: "9p", Cache: "loose", Inotify: &yes}}
	c.FillDefaults(linuxHost)
	c.Normalize()
	if err := c.ValidateOn(linuxHost); err != nil {
		t.Fatal(err)
	}
	syncs := c.SyncMounts()
	if len(syncs) != 2 || syncs[0].GuestPath != dir || syncs[1].GuestPath != "/srv/app" || syncs[0].HostToGuest || syncs[1].HostToGuest {
		t.Fatalf("sync mounts %+v; want both, two-way, at the same path or the mountPoint", syncs)
	}
	for _, m := range c.Mounts {
		if !m.IsSync() || !m.Writable || m.Type != "" || m.Cache != "" || m.Inotify != nil {
			t.Errorf("mount %+v; want a writable sync mount without share settings", m)
		}
	}
	vm := Default(linuxHost)
	vm.Mounts = []Mount{{Location: dir}}
	vm.FillDefaults(linuxHost)
	if vm.Mounts[0].IsSync() {
		t.Error("a VM's share became a sync mount")
	}
}
