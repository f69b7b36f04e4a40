package instance

import (
	"log/slog"

	"github.com/vmdock/vmdock/vm/store"
)

// endOrphans ends VM processes a dead host agent left running.
func endOrphans(inst *store.Instance) {
	if inst.EndOrphans == nil {
		return
	}
	if err := inst.EndOrphans(inst.Dir); err != nil {
		slog.Warn("end orphaned VM processes", "dir", inst.Dir, "err", err)
	}
}
