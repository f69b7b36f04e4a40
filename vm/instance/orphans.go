package instance

import (
	"log/slog"

	"github.com/vmdock/vmdock/vm/store"
)

// EndOrphans ends the VM processes a dead host agent left running for the
// instance in dir, and removes their stale sockets and pid files; nil ends
// nothing. cmd/vmdock sets it to the QEMU driver's cleanup, the one driver
// that leaves processes (vz runs in the host agent's own process and dies
// with it): below the command line only the host agent links the drivers.
// The cleanup must end only processes whose pid files are in dir and whose
// command lines still name it, so an instance of another driver finds
// nothing to end.
var EndOrphans func(dir string) error

// endOrphans runs EndOrphans for inst; a failure is logged, as the stale
// files it leaves do not stop a start.
func endOrphans(inst *store.Instance) {
	if EndOrphans == nil {
		return
	}
	if err := EndOrphans(inst.Dir); err != nil {
		slog.Warn("end orphaned VM processes", "dir", inst.Dir, "err", err)
	}
}
