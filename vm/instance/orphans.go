package instance

import (
	"log/slog"

	"github.com/vmdock/vmdock/vm/qemu"
	"github.com/vmdock/vmdock/vm/store"
)

// endOrphans ends VM processes a dead host agent left running. QEMU is
// the driver that leaves processes (qemu, virtiofsd); vz runs in the host
// agent's own process and dies with it. It ends only processes whose pid
// files are in the instance's folder and whose command lines still name
// it, so an instance of another driver finds nothing to end.
func endOrphans(inst *store.Instance) {
	if err := qemu.CleanupOrphans(inst.Dir); err != nil {
		slog.Warn("end orphaned VM processes", "dir", inst.Dir, "err", err)
	}
}
