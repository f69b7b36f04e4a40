package images

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/vmdock/vmdock/internal/atomicfile"
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
	return publishBuild(filepath.Join(root, "hack", "image", "out", "vmdock-"+arch+".tar.zst"))
}

// publishBuild puts a fresh build into <cache>/built too, so the host
// agent (which does not run in the checkout) finds it by catalog name.
func publishBuild(out string) error {
	c, err := OpenCache("")
	if err != nil {
		return err
	}
	in, err := os.Open(out)
	if err != nil {
		return fmt.Errorf("image build: no output: %w", err)
	}
	defer in.Close()
	tmp, err := c.tempFile("built-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, in)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = atomicfile.Commit(tmp.Name(), filepath.Join(c.BuiltDir(), filepath.Base(out)))
	}
	if err != nil {
		return fmt.Errorf("image build: copy %s into the cache: %w", out, err)
	}
	return nil
}

// noImageAdvice names every way to arch's guest image that works on Linux.
func noImageAdvice(arch string) string {
	return "build one (`" + makeImageTarget(arch) + "` in a vmdock checkout, or `sudo vmdock image build --arch " + arch + "`), " +
		"set VMDOCK_IMAGE_DIR to a folder holding " + archiveFile(arch) + ", " +
		"`vmdock image import FILE` (a " + archiveFile(arch) + " from a release or a build), point " + BaseURLEnv + " or imageBaseURL at published images, or start with --image PATH"
}
