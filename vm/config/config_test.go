package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/driver"
)

var linuxHost = Host{OS: "linux", Arch: "amd64", CPUs: 4, Accel: "kvm", Virtiofsd: "/usr/lib/qemu/virtiofsd"}
var macHost = Host{OS: "darwin", Arch: "arm64", MacOSVersion: "14.5", CPUs: 8, VZ: true, Accel: "hvf"}
var mac15Host = Host{OS: "darwin", Arch: "arm64", MacOSVersion: "15.2", CPUs: 8, VZ: true, Accel: "hvf"}

func validConfig(t *testing.T, h Host) Config {
	t.Helper()
	c := Default(h)
	c.CPUs = 2
	c.Mounts = []Mount{{Location: t.TempDir(), Writable: true}}
	c.Normalize()
	return c
}

func TestValidateOn(t *testing.T) {
	tests := []struct {
		name   string
		host   Host
		edit   func(*Config)
		want   []string // substrings; empty: valid
		nLines int      // expected number of problems when > 1
	}{
		{name: "default linux", host: linuxHost, edit: func(*Config) {}},
		{name: "default mac", host: macHost, edit: func(*Config) {}},
		{name: "mac rosetta", host: macHost, edit: func(c *Config) { c.VZRosetta = true }},
		{name: "mac qemu foreign arch", host: macHost, edit: func(c *Config) { c.VMType, c.Arch, c.MountType, c.Network.Stack = "qemu", "amd64", "9p", "slirp" }},
		{name: "cpus 0", host: linuxHost, edit: func(c *Config) { c.CPUs = 0 }, want: []string{"cpus: 0", "1 to 4"}},
		{name: "cpus over host", host: linuxHost, edit: func(c *Config) { c.CPUs = 5 }, want: []string{"cpus: 5"}},
		{name: "memory NaN", host: linuxHost, edit: func(c *Config) { c.MemoryGiB = math.NaN() }, want: []string{"memory: NaN"}},
		{name: "memory small", host: linuxHost, edit: func(c *Config) { c.MemoryGiB = 0.25 }, want: []string{"memory: 0.25"}},
		{name: "disk small", host: linuxHost, edit: func(c *Config) { c.DiskGiB = 9 }, want: []string{"disk: 9", "10 to"}},
		{name: "arch", host: linuxHost, edit: func(c *Config) { c.Arch = "x86_64" }, want: []string{`arch: "x86_64"`, "amd64 or arm64"}},
		{name: "vz on linux", host: linuxHost, edit: func(c *Config) { c.VMType = "vz" }, want: []string{`vmType: "vz"`, "macOS 13"}},
		{name: "vz foreign arch", host: macHost, edit: func(c *Config) { c.Arch = "amd64" }, want: []string{"vz cannot emulate"}},
		{name: "vz 9p", host: macHost, edit: func(c *Config) { c.MountType = "9p" }, want: []string{"vz has no 9p"}},
		{name: "qemu virtiofs without daemon", host: Host{OS: "linux", Arch: "amd64", CPUs: 2}, edit: func(c *Config) { c.MountType = "virtiofs" }, want: []string{"no virtiofsd"}},
		{name: "rosetta on linux", host: linuxHost, edit: func(c *Config) { c.VZRosetta = true }, want: []string{"vzRosetta", "vmType is vz"}},
		{name: "rosetta on intel mac", host: Host{OS: "darwin", Arch: "amd64", CPUs: 4, VZ: true}, edit: func(c *Config) { c.VZRosetta = true }, want: []string{"host amd64"}},
		{name: "vz on macOS 12", host: Host{OS: "darwin", Arch: "arm64", MacOSVersion: "12.7.6", CPUs: 8, Accel: "hvf"}, edit: func(c *Config) { c.VMType = "vz" },
			want: []string{`vmType: "vz" is not accepted; accepted: qemu (vz needs macOS 13.0 or later; this host is darwin 12.7.6)`}},
		{name: "nested virtualization on macOS 15", host: mac15Host, edit: func(c *Config) { c.VZNested = true }},
		{name: "nested virtualization on macOS 14", host: macHost, edit: func(c *Config) { c.VZNested = true },
			want: []string{`vzNestedVirtualization: true is not accepted; accepted: false before macOS 15.0 (this host runs "14.5")`}},
		{name: "nested virtualization with qemu", host: mac15Host, edit: func(c *Config) { c.VMType, c.MountType, c.Network.Stack, c.VZNested = "qemu", "9p", "slirp", true },
			want: []string{`vzNestedVirtualization: true is not accepted; accepted: false unless vmType is vz (it is "qemu")`}},
		{name: "nested virtualization on intel mac", host: Host{OS: "darwin", Arch: "amd64", MacOSVersion: "15.5", CPUs: 4, VZ: true}, edit: func(c *Config) { c.VZNested = true },
			want: []string{"vzNestedVirtualization: true is not accepted; accepted: false unless the host is Apple silicon (this one is amd64)"}},
		{name: "nested virtualization on linux", host: linuxHost, edit: func(c *Config) { c.VZNested = true },
			want: []string{"vzNestedVirtualization: true is not accepted", "unless vmType is vz"}},
		{name: "accel kvm on linux qemu", host: linuxHost, edit: func(c *Config) { c.Accel = "kvm" }},
		{name: "accel tcg on linux", host: linuxHost, edit: func(c *Config) { c.Accel = "tcg" }},
		{name: "accel hvf on mac qemu", host: macHost, edit: func(c *Config) { c.VMType, c.MountType, c.Network.Stack, c.Accel = "qemu", "9p", "slirp", "hvf" }},
		{name: "gvisor on qemu", host: linuxHost, edit: func(c *Config) { c.Network.Stack = "gvisor" }},
		{name: "gvisor on vz", host: macHost, edit: func(c *Config) { c.Network.Stack = "gvisor" }},
		{name: "vznat on qemu", host: linuxHost, edit: func(c *Config) { c.Network.Stack = "vznat" },
			want: []string{`network.stack: "vznat" is not accepted; accepted: slirp or gvisor with vmType qemu`}},
		{name: "slirp on vz", host: macHost, edit: func(c *Config) { c.Network.Stack = "slirp" },
			want: []string{`network.stack: "slirp" is not accepted; accepted: vznat or gvisor with vmType vz`}},
		{name: "accel hvf on linux", host: linuxHost, edit: func(c *Config) { c.Accel = "hvf" }, want: []string{`accel: "hvf" is not accepted; accepted: auto or tcg, kvm`}},
		{name: "accel kvm with vz", host: macHost, edit: func(c *Config) { c.Accel = "kvm" }, want: []string{`accel: "kvm"`, "auto or tcg, hvf"}},
		{name: "accel tcg with vz", host: macHost, edit: func(c *Config) { c.Accel = "tcg" }, want: []string{`accel: "tcg"`, "vz always uses the hardware"}},
		{name: "accel unknown", host: linuxHost, edit: func(c *Config) { c.Accel = "xen" }, want: []string{`accel: "xen"`, "auto, kvm, hvf or tcg"}},
		{name: "port rule", host: linuxHost, edit: func(c *Config) {
			c.PortForward.Rules = []PortRule{{Guest: "8000-8010", Host: "9000-9005"}, {Guest: "0", Host: "x", Proto: "sctp"}}
		}, want: []string{"as long as guest", `guest: "0"`, `host: "x"`, `proto: "sctp"`}},
		{name: "port ignore", host: linuxHost, edit: func(c *Config) { c.PortForward.Ignore = []string{"22", "70000"} }, want: []string{`"70000"`}},
		{name: "host access ip", host: linuxHost, edit: func(c *Config) { c.Network.HostAccessIP = "::1" }, want: []string{"network.hostAccessIP"}},
		{name: "every problem at once", host: linuxHost, edit: func(c *Config) {
			c.CPUs, c.DiskGiB, c.Runtime, c.DiskSync = 0, 1, "podman", "sometimes"
		}, want: []string{"cpus", "disk", "runtime", "diskSync"}, nLines: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t, tt.host)
			tt.edit(&c)
			err := c.ValidateOn(tt.host)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("ValidateOn: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateOn: no error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tt.nLines > 0 {
				if n := len(strings.Split(err.Error(), "\n")); n != tt.nLines {
					t.Errorf("got %d problems, want %d: %q", n, tt.nLines, err)
				}
			}
		})
	}
}

func TestCheckChange(t *testing.T) {
	old := Default(linuxHost)
	tests := []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{name: "same", edit: func(*Config) {}},
		{name: "grow disk and more cpus", edit: func(c *Config) { c.DiskGiB += 10; c.CPUs = 1 }},
		{name: "arch", edit: func(c *Config) { c.Arch = "riscv" }, want: []string{"arch: cannot change"}},
		{name: "vm type", edit: func(c *Config) { c.VMType = "other" }, want: []string{"vmType: cannot change"}},
		{name: "runtime", edit: func(c *Config) { c.Runtime = "containerd" }, want: []string{"runtime: cannot change"}},
		{name: "shrink", edit: func(c *Config) { c.DiskGiB-- }, want: []string{"disk: cannot shrink"}},
		{name: "accel changes without a re-create", edit: func(c *Config) { c.Accel = "tcg" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := old
			tt.edit(&n)
			err := CheckChange(old, n)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestConfigRoundTrip(t *testing.T) {
	c := Default(linuxHost)
	c.Env = map[string]string{"A": "b"}
	c.Network.DNS = []string{"1.1.1.1"}
	c.PortForward.Ignore = []string{"22"}
	p := filepath.Join(t.TempDir(), "vmdock.yaml")
	if err := c.Save(p); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p, linuxHost)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.Marshal()
	b, _ := got.Marshal()
	if string(a) != string(b) {
		t.Fatalf("round trip changed the config:\n%s\nvs\n%s", a, b)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.yaml"), linuxHost); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want ErrNotExist", err)
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string // error substring; empty: ok
		check      func(Config) bool
	}{
		{name: "empty file is the defaults", yaml: "", check: func(c Config) bool { return c.CPUs == Default(linuxHost).CPUs }},
		{name: "override", yaml: "cpus: 1\nmemory: 1.5\n", check: func(c Config) bool { return c.CPUs == 1 && c.MemoryGiB == 1.5 }},
		{name: "qemu mount default follows vmType", yaml: "vmType: vz\n", check: func(c Config) bool { return c.MountType == "virtiofs" }},
		{name: "network stack default on vz", yaml: "vmType: vz\n", check: func(c Config) bool { return c.Network.Stack == "gvisor" }},
		{name: "network stack default on qemu", yaml: "vmType: qemu\n", check: func(c Config) bool { return c.Network.Stack == "gvisor" }},
		{name: "network stack slirp kept", yaml: "network:\n  stack: slirp\n", check: func(c Config) bool { return c.Network.Stack == "slirp" }},
		{name: "network stack gvisor", yaml: "network:\n  stack: gvisor\n", check: func(c Config) bool { return c.Network.Stack == "gvisor" }},
		{name: "nested virtualization off by default", yaml: "", check: func(c Config) bool { return !c.VZNested }},
		{name: "nested virtualization from YAML", yaml: "vzNestedVirtualization: true\n", check: func(c Config) bool { return c.VZNested }},
		{name: "nested virtualization not a bool", yaml: "vzNestedVirtualization: maybe\n", want: "invalid YAML"},
		{name: "unknown key", yaml: "cpu: 2\n", want: "field cpu not found"},
		{name: "bad yaml", yaml: "cpus: [\n", want: "invalid YAML"},
		{name: "wrong type", yaml: "cpus: many\n", want: "invalid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), linuxHost)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line containing %q", err, tt.want)
				}
				return
			}
			if err != nil || !tt.check(c) {
				t.Fatalf("Parse = %+v, %v", c, err)
			}
		})
	}
}

// An instance's saved config without network.stack keeps the stack the
// instance ran: the recorded one, else for an instance that booted before
// the record its VM type's own; a config that names one, or an instance
// that never ran, is not touched.
func TestLoadInstanceKeepsTheStackItRan(t *testing.T) {
	ranOwn := NetHistory{Booted: true}
	ranGvisor := NetHistory{Recorded: driver.NetStackGvisor, Booted: true}
	tests := []struct {
		name, yaml string
		host       Host
		ran        NetHistory
		want       string
	}{
		{"qemu instance from before the key keeps slirp", "cpus: 2\n", linuxHost, ranOwn, "slirp"},
		{"vz instance from before the key keeps vznat", "vmType: vz\n", macHost, ranOwn, "vznat"},
		{"instance that ran gvisor keeps it", "cpus: 2\n", linuxHost, ranGvisor, "gvisor"},
		{"instance that never ran gets the default", "cpus: 2\n", linuxHost, NetHistory{}, "gvisor"},
		{"a stack the config names wins", "network:\n  stack: gvisor\n", linuxHost, ranOwn, "gvisor"},
		{"slirp named stays slirp", "network:\n  stack: slirp\n", linuxHost, ranGvisor, "slirp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "vmdock.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := LoadInstance(path, tt.host, tt.ran)
			if err != nil {
				t.Fatal(err)
			}
			if c.Network.Stack != tt.want {
				t.Errorf("network.stack = %q, want %q", c.Network.Stack, tt.want)
			}
			if p, err := Parse([]byte(tt.yaml), tt.host); err != nil || (p.Network.Stack != "gvisor" && !strings.Contains(tt.yaml, "stack")) {
				t.Errorf("Parse (a new instance) = %q, %v; want the default gvisor", p.Network.Stack, err)
			}
		})
	}
	if _, err := LoadInstance(filepath.Join(t.TempDir(), "missing.yaml"), linuxHost, ranOwn); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing config: %v, want os.ErrNotExist", err)
	}
}
