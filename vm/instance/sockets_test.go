package instance

import (
	"slices"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/sockpath"
	"github.com/vmdock/vmdock/vm/store"
)

func TestSocketPaths(t *testing.T) {
	inst := &store.Instance{Name: "p", Dir: "/h/p"}
	twoShares := []config.Mount{{Location: "/a"}, {Location: "/b", Type: mounts.Type9p}, {Location: "/c", Mode: "sync", Writable: true}}
	tests := []struct {
		name string
		cfg  config.Config
		want []string
	}{
		{"vz, docker", config.Config{VMType: driver.TypeVZ, Runtime: "docker", Mounts: twoShares, MountType: mounts.TypeVirtiofs},
			[]string{"/h/p/ha.sock", "/h/p/docker.sock"}},
		{"vz, containerd", config.Config{VMType: driver.TypeVZ, Runtime: config.RuntimeContainerd},
			[]string{"/h/p/ha.sock", "/h/p/containerd.sock"}},
		{"qemu, virtiofs", config.Config{VMType: driver.TypeQEMU, Runtime: "docker", Mounts: twoShares, MountType: mounts.TypeVirtiofs},
			[]string{"/h/p/ha.sock", "/h/p/docker.sock", "/h/p/qmp.sock", "/h/p/agent.sock", "/h/p/virtiofs-1.sock"}},
		{"qemu, 9p only", config.Config{VMType: driver.TypeQEMU, Runtime: "docker", Mounts: twoShares[:1], MountType: mounts.Type9p},
			[]string{"/h/p/ha.sock", "/h/p/docker.sock", "/h/p/qmp.sock", "/h/p/agent.sock"}},
	}
	for _, tt := range tests {
		if got := SocketPaths(inst, tt.cfg); !slices.Equal(got, tt.want) {
			t.Errorf("%s: SocketPaths = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// The runtime's socket counts: containerd.sock is the longest name.
func TestCheckSocketPathsNamesTheLongOne(t *testing.T) {
	cfg := config.Config{VMType: driver.TypeVZ, Runtime: config.RuntimeContainerd}
	dir := "/" + strings.Repeat("d", sockpath.Max-len("/containerd.sock")-1) // Max bytes with the socket
	if err := CheckSocketPaths(&store.Instance{Dir: dir}, cfg); err != nil {
		t.Errorf("paths of at most %d bytes: %v", sockpath.Max, err)
	}
	dir += "d"
	err := CheckSocketPaths(&store.Instance{Dir: dir}, cfg)
	if err == nil || !strings.Contains(err.Error(), dir+"/containerd.sock") {
		t.Errorf("containerd.sock one byte too long: %v", err)
	}
}
