package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestDefaultConfigForHost(t *testing.T) {
	for _, tt := range []struct {
		name                    string
		host                    Host
		arch, vmType, mountType string
		cpus                    int
	}{
		{"linux with virtiofsd", linuxHost, "amd64", "qemu", "virtiofs", 2},
		{"linux without virtiofsd", Host{OS: "linux", Arch: "arm64", CPUs: 1, Accel: "kvm"}, "arm64", "qemu", "9p", 1},
		{"mac with vz", macHost, "arm64", "vz", "virtiofs", 2},
		{"mac before Ventura", Host{OS: "darwin", Arch: "amd64", MacOSVersion: "12.7", CPUs: 4, Accel: "hvf"}, "amd64", "qemu", "9p", 2},
		{"host reporting no cores", Host{OS: "linux", Arch: "amd64"}, "amd64", "qemu", "9p", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default(tt.host)
			if c.Arch != tt.arch || c.VMType != tt.vmType || c.MountType != tt.mountType || c.CPUs != tt.cpus {
				t.Errorf("Default = arch %s, vmType %s, mountType %s, cpus %d; want %s, %s, %s, %d",
					c.Arch, c.VMType, c.MountType, c.CPUs, tt.arch, tt.vmType, tt.mountType, tt.cpus)
			}
		})
	}
}

// The config reads the host it is given and probes nothing: a virtiofsd on
// PATH that records every run must never run, and the same host always
// gives the same config.
func TestConfigDoesNotProbeTheHost(t *testing.T) {
	bin, log := t.TempDir(), filepath.Join(t.TempDir(), "runs")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\necho --shared-dir\n"
	if err := os.WriteFile(filepath.Join(bin, "virtiofsd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)

	first := Default(linuxHost)
	for i := 0; i < 3; i++ {
		if c := Default(linuxHost); !reflect.DeepEqual(c, first) {
			t.Fatalf("Default changed between calls:\n%+v\n%+v", first, c)
		}
	}
	parsed, err := Parse([]byte("vmType: qemu\n"), linuxHost)
	if err != nil {
		t.Fatal(err)
	}
	parsed.Mounts = []Mount{{Location: t.TempDir(), Writable: true}}
	parsed.Normalize()
	if err := parsed.ValidateOn(linuxHost); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(log); err == nil {
		t.Fatalf("the config ran virtiofsd: %q", b)
	}
}

// FillDefaults is where the mount type follows the VM type: only an empty
// one is filled, and by what the host offers for that VM type.
func TestFillDefaults(t *testing.T) {
	noVirtiofsd := Host{OS: "linux", Arch: "amd64", CPUs: 2}
	for _, tt := range []struct {
		name         string
		host         Host
		vmType, have string
		want         string
	}{
		{"qemu with virtiofsd", linuxHost, "qemu", "", "virtiofs"},
		{"qemu without virtiofsd", noVirtiofsd, "qemu", "", "9p"},
		{"vz", macHost, "vz", "", "virtiofs"},
		{"qemu on a vz host", macHost, "qemu", "", "9p"},
		{"a chosen type stays", noVirtiofsd, "qemu", "virtiofs", "virtiofs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{VMType: tt.vmType, MountType: tt.have}
			c.FillDefaults(tt.host)
			if c.MountType != tt.want {
				t.Errorf("mount type %q, want %q", c.MountType, tt.want)
			}
		})
	}
}
