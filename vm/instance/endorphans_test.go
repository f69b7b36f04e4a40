package instance

import (
	"errors"
	"testing"

	"github.com/vmdock/vmdock/vm/store"
)

// vm does not import the drivers: ending a dead host agent's VM processes
// is what the caller put on the instance, asked for the instance's folder.
func TestEndOrphansAsksTheCaller(t *testing.T) {
	inst, err := store.Open(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	endOrphans(inst) // nil: nothing to end, and no panic

	var asked []string
	inst.EndOrphans = func(dir string) error {
		asked = append(asked, dir)
		return errors.New("a failure is logged, not fatal")
	}
	if err := cleanupStale(inst); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0] != inst.Dir {
		t.Fatalf("EndOrphans asked for %q, want [%s]", asked, inst.Dir)
	}
}
