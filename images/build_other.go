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
