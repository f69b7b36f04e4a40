//go:build !linux

package images

import (
	"context"
	"errors"
	"io"
)

// Build is Linux only: the image is assembled with mmdebstrap and mkfs.ext4.
func Build(context.Context, string, io.Writer, io.Writer) error {
	return errors.New("image build runs on Linux only (it needs mmdebstrap and root); build on a Linux machine and `vmdock image import` the result")
}

// noImageAdvice names every way to arch's guest image that works off
// Linux, where images are not built.
func noImageAdvice(arch string) string {
	return "point " + BaseURLEnv + " (or imageBaseURL in vmdock.yaml) at published images, " +
		"`vmdock image import FILE` with a " + archiveFile(arch) + " from a release or built on Linux (`" + makeImageTarget(arch) + "`), " +
		"set VMDOCK_IMAGE_DIR to a folder holding one, or start with --image PATH"
}
