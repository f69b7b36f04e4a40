package instance

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/vm/layout"
	"github.com/vmdock/vmdock/vm/store"
)

// Lock takes inst's lock (store's Instance.Lock). When another process
// holds it while the instance is starting, the common case of a `vmdock
// start` holding it for the whole boot, the error says so and how to
// watch it, rather than only that something holds a file.
//
// A folder a newer vmdock made is refused before the lock file is
// touched; one of an older format is migrated (vm/layout) once the lock
// is held, before the command writes anything.
func Lock(ctx context.Context, inst *store.Instance) (*store.Lock, error) {
	if err := layout.Check(inst, agent.Version); err != nil {
		return nil, err
	}
	l, err := inst.Lock()
	var busy *store.BusyError
	if err == nil {
		if _, err := layout.Migrate(inst, agent.Version); err != nil {
			l.Unlock()
			return nil, err
		}
		return l, nil
	}
	if !errors.As(err, &busy) {
		return l, err
	}
	if st := Status(ctx, inst); st.State == StateStarting {
		step := ""
		if st.HostAgent != nil && st.HostAgent.Step != "" {
			step = ", step " + st.HostAgent.Step
		}
		return nil, fmt.Errorf("instance %q is still starting (host agent pid %d%s; %s holds the profile lock); wait for it or run `vmdock status -p %s`: %w", inst.Name, st.PID, step, busy.Holder, inst.Name, store.ErrLocked)
	}
	return nil, err
}
