package qemu

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// Pause and Unpause are QMP stop and cont; QEMU's refusal and an exited
// VM are errors that say which.
func TestPauseAndUnpause(t *testing.T) {
	m, f := startFakeQMP(t, map[string][]string{
		"cont": {`{"return": {}}`, `{"error": {"class": "GenericError", "desc": "Resetting the Virtual Machine is required"}}`},
	})
	ctx := context.Background()
	if err := m.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unpause(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.commands(); !slices.Equal(got, []string{"stop", "cont"}) {
		t.Fatalf("QMP commands %q", got)
	}
	if err := m.Unpause(ctx); err == nil || !strings.Contains(err.Error(), "unpause: QMP cont: GenericError: Resetting") {
		t.Errorf("refused cont: %v", err)
	}
	close(m.done)
	if err := m.Pause(ctx); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("pause of an exited VM: %v", err)
	}
}
