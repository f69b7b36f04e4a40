package hostagent

import (
	"reflect"
	"testing"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/store"
)

// The spec's shares come resolved from the config, and the guest is asked
// to mount each one where its share says: type, tag, guest path and
// read-only travel together, not matched up by index.
func TestSpecSharesAndMountRequests(t *testing.T) {
	ha := &hostAgent{
		inst: &store.Instance{Name: "x", Dir: "/vmdock/x"},
		cfg: config.Config{
			Arch: driver.ArchAMD64, VMType: driver.TypeQEMU, CPUs: 1, MemoryGiB: 1, MountType: mounts.TypeVirtiofs,
			Mounts: []config.Mount{
				{Location: "/home/u", GuestPath: "/home/u", Writable: true},
				{Location: "/src", GuestPath: "/work", Type: mounts.Type9p, Exclude: []string{"node_modules"}},
			},
		},
	}
	spec, err := ha.buildSpec(&images.Image{Kernel: "/k"})
	if err != nil {
		t.Fatal(err)
	}
	wantShares := []mounts.Share{
		{Tag: "vmdock0", HostPath: "/home/u", GuestPath: "/home/u", Type: mounts.TypeVirtiofs, Inotify: true},
		{Tag: "vmdock1", HostPath: "/src", GuestPath: "/work", ReadOnly: true, Type: mounts.Type9p, Exclude: []string{"node_modules"}, Inotify: true},
	}
	if !reflect.DeepEqual(spec.Shares, wantShares) {
		t.Fatalf("spec shares %+v\nwant %+v", spec.Shares, wantShares)
	}
	wantReqs := []agent.MountRequest{
		{Type: mounts.TypeVirtiofs, Tag: "vmdock0", Target: "/home/u", HostPath: "/home/u"},
		{Type: mounts.Type9p, Tag: "vmdock1", Target: "/work", ReadOnly: true, HostPath: "/src", Exclude: []string{"node_modules"}},
	}
	for i, sh := range spec.Shares {
		if got := mountRequest(sh); !reflect.DeepEqual(got, wantReqs[i]) {
			t.Errorf("mount request %d = %+v, want %+v", i, got, wantReqs[i])
		}
	}
}
