package scratch_test

import (
	"github.com/vmdock/vmdock/bench/scratch"
	"github.com/vmdock/vmdock/vm/qemu"
)

// The QEMU machine hot-plugs scratch disks, which Handler finds by asking
// for a Machine. vm/qemu cannot say so itself: bench sits above vm, so the
// compile-time check lives here. (vz cannot hot-plug: ErrUnsupported.)
var _ scratch.Machine = (*qemu.Machine)(nil)
