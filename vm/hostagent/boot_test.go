package hostagent

import (
	"testing"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/vm/store"
)

// A bare disk's root is in a partition the agent cannot grow: asking it
// would do nothing for ext4 and fail the setup step for anything else.
func TestGuestSetupGrowsTheRootOfVMDockImagesOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		img  *images.Image
		want bool
	}{
		{"vmdock image", &images.Image{Kind: images.KindVMDock, Kernel: "/c/vmlinuz", Initrd: "/c/initrd.img"}, true},
		{"bare qcow2", &images.Image{Kind: images.KindQCOW2}, false},
		{"bare raw", &images.Image{Kind: images.KindRaw}, false},
		{"no image yet", nil, false},
	} {
		ha := &hostAgent{inst: &store.Instance{Name: "default"}, boot: bootResults{img: tc.img}}
		if got := ha.guestSetup().GrowRoot; got != tc.want {
			t.Errorf("%s: GrowRoot %v, want %v", tc.name, got, tc.want)
		}
	}
}
