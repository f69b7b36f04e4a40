package main

import (
	"context"
	"fmt"
	"io"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/internal/fsutil"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

// prepareImage is swapped by the tests that fake the lifecycle.
var prepareImage = prepareStartImage

// prepareStartImage runs before anything of the instance is written: a
// start that would make a root disk from the default image resolves that
// image here, so "no image" fails with no instance folder left behind,
// and downloads it into the cache here, so its progress shows in the
// terminal that ran `vmdock start` (the host agent's output goes to its
// log) and the host agent then finds it cached. A named image, and an
// instance that boots the image its root disk came from, stay the host
// agent's business.
func prepareStartImage(ctx context.Context, inst *store.Instance, cfg config.Config, upgrade bool, out io.Writer) error {
	if cfg.Image != "" && cfg.Image != images.NameVMDock {
		return nil
	}
	if !upgrade && fsutil.Exists(inst.DiskPath()) {
		return nil
	}
	opts := images.Options{BaseURL: cfg.ImageBaseURL}
	d, err := images.ResolveDefault(ctx, cfg.Arch, opts)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	if d.Cached || d.Source != images.SourceDownload {
		return nil
	}
	fmt.Fprintf(out, "downloading the %s image for %s from %s\n", images.NameVMDock, cfg.Arch, d.URL)
	opts.Progress, opts.IsTTY = out, imageProgressIsTTY(out)
	if _, err := images.Ensure(ctx, "", cfg.Arch, opts); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	return nil
}
