package vm

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/vmdock/vmdock/atomicfile"
	"github.com/vmdock/vmdock/network/dockerctx"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

// state is what vmdock remembers between commands about an instance.
type state struct {
	// PreviousContext is the docker context that was current before start
	// switched to ours; stop and delete put it back.
	PreviousContext string `json:"previousContext,omitempty"`
}

func loadState(inst *store.Instance) state {
	var s state
	b, err := os.ReadFile(inst.StatePath())
	if err == nil {
		json.Unmarshal(b, &s)
	}
	return s
}

func saveState(inst *store.Instance, s state) error {
	b, _ := json.MarshalIndent(s, "", "  ")
	return atomicfile.WriteFile(inst.StatePath(), b, 0o600)
}

// activateContext creates or updates our context and, when the config asks,
// makes it current, remembering the one it replaces. A restart while ours
// is already current keeps the remembered one.
func activateContext(inst *store.Instance, cfg config.Config) error {
	name := dockerctx.Name(inst.Name)
	host := "unix://" + inst.DockerSocketPath()
	if err := dockerctx.Ensure(name, host, fmt.Sprintf("vmdock profile %s", inst.Name)); err != nil {
		return fmt.Errorf("docker context %s: %w", name, err)
	}
	if !cfg.Activate {
		return nil
	}
	alreadyOurs := dockerctx.Current() == name
	prev, err := dockerctx.Activate(name)
	if err != nil {
		return fmt.Errorf("switch docker context to %s: %w", name, err)
	}
	if !alreadyOurs {
		s := loadState(inst)
		s.PreviousContext = prev
		if err := saveState(inst, s); err != nil {
			return fmt.Errorf("remember previous docker context: %w", err)
		}
	}
	return nil
}

// RestoreContext puts the docker context back when the instance went down
// without `vmdock stop`: the host agent calls it when the guest powered
// itself off.
func RestoreContext(inst *store.Instance) { restoreContext(inst) }

// restoreContext switches back to the remembered context, but only if ours
// is still current: a user who switched away by hand keeps their choice.
func restoreContext(inst *store.Instance) {
	s := loadState(inst)
	if s.PreviousContext == "" {
		return
	}
	if err := dockerctx.Restore(s.PreviousContext, dockerctx.Name(inst.Name)); err != nil {
		slog.Warn("restore docker context", "context", s.PreviousContext, "err", err)
		return
	}
	s.PreviousContext = ""
	if err := saveState(inst, s); err != nil && !errors.Is(err, os.ErrNotExist) {
		slog.Warn("save state", "err", err)
	}
}

func removeContext(inst *store.Instance) {
	if err := dockerctx.Remove(dockerctx.Name(inst.Name)); err != nil {
		slog.Warn("remove docker context", "err", err)
	}
}

// endOrphans ends VM processes a dead host agent left running.
func endOrphans(inst *store.Instance) {
	if inst.EndOrphans == nil {
		return
	}
	if err := inst.EndOrphans(inst.Dir); err != nil {
		slog.Warn("end orphaned VM processes", "dir", inst.Dir, "err", err)
	}
}
