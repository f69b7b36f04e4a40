package images

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Build runs hack/image/build.sh for arch from the vmdock checkout that
// holds the working directory. It needs root (mmdebstrap, mkfs).
func Build(ctx context.Context, arch string, stdout, stderr io.Writer) error {
	if err := checkArch(arch); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("image build needs root (mmdebstrap): run it with sudo")
	}
	root := repoRoot()
	script := filepath.Join(root, "hack", "image", "build.sh")
	if _, err := os.Stat(script); err != nil {
		return fmt.Errorf("image build: %s not found: run it from a vmdock source checkout", script)
	}
	cmd := exec.CommandContext(ctx, script, "--arch", arch)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("image build %s: %w", script, err)
	}
	return nil
}
