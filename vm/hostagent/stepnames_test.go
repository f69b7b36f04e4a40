package hostagent

import (
	"strings"
	"testing"
)

func TestStepNamesFollowBootSteps(t *testing.T) {
	names := StepNames("containerd")
	if len(names) == 0 || names[0] != "host-settings" {
		t.Fatalf("StepNames: %q, want host-settings first", names)
	}
	joined := strings.Join(names, " ")
	if !strings.Contains(joined, "containerd tunnels containerd-ping") {
		t.Errorf("StepNames(containerd): %q, want the runtime's steps around tunnels", joined)
	}
}
