package dockerctx

import (
	"testing"

	"github.com/vmdock/vmdock/vm/store"
)

func TestOf(t *testing.T) {
	inst, _ := store.Open("/h", "dev")
	p := Of(inst)
	if p.Name != "dev" || p.Socket != "/h/dev/docker.sock" || p.StatePath != "/h/dev/state.json" {
		t.Fatalf("Of = %+v", p)
	}
}
