package agentbin

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOverrideEnv(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(p, []byte("agent-bytes"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(OverrideEnv, p)
	b, err := Binary("amd64")
	if err != nil || string(b) != "agent-bytes" {
		t.Fatalf("Binary = %q, %v", b, err)
	}
}

func TestMissingArchNamesMakeBuild(t *testing.T) {
	t.Setenv(OverrideEnv, "")
	_, err := Binary("riscv64")
	if err == nil {
		t.Fatal("want an error for an arch that is never embedded")
	}
}
