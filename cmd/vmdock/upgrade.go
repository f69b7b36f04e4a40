package main

import (
	"fmt"
	"io"

	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/vm/resume"
	"github.com/vmdock/vmdock/vm/store"
)

// requestImageUpgrade asks the host agent this start spawns to remake the
// root disk from the current image. A saved VM ran on the old disk, so it
// is dropped, as with --cold.
func requestImageUpgrade(inst *store.Instance, out io.Writer) error {
	if resume.Exists(inst.SavedStateDir()) {
		fmt.Fprintln(out, "booting cold (--upgrade-image): the saved VM state is dropped")
	}
	if err := resume.Remove(inst.SavedStateDir()); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(inst.UpgradeImagePath(), []byte("requested\n"), 0o600); err != nil {
		return fmt.Errorf("request image upgrade: %w", err)
	}
	return nil
}
