package main

import (
	"context"
	"fmt"
	"io"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

// prepareImage is swapped by the tests that fake the lifecycle.
var prepareImage = prepareStartImage

// prepareStartImage runs before anything of the instance is written: a
// start that would make a root disk from the default image resolves that
// image here, so "no image" fails with no instance folder left behind.
// A named image, and an instance that boots the image its root disk came
// from, stay the host agent's business.
func prepareStartImage(ctx context.Context, inst *store.Instance, cfg config.Config, upgrade bool, out io.Writer) error {
	if cfg.Image != "" && cfg.Image != images.NameVMDock {
		return nil
	}
	if !upgrade && fileExists(inst.DiskPath()) {
		return nil
	}
	opts := images.Options{BaseURL: cfg.ImageBaseURL}
	if _, err := images.ResolveDefault(ctx, cfg.Arch, opts); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	return nil
}
