package main

import (
	"context"
	"fmt"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

// imageStatusJSON is `status --json`'s "image": the image the instance's
// root disk was made from (it boots that one), and a newer default when
// there is one (documented in docs/json.md).
type imageStatusJSON struct {
	Pinned string `json:"pinned"`
	// Newer is what a new instance would get instead, known without the
	// network: `start --upgrade-image` moves this instance to it.
	Newer *images.DefaultImage `json:"newer,omitempty"`
}

func imageStatus(ctx context.Context, inst *store.Instance, cfg config.Config) *imageStatusJSON {
	pinned := inst.PinnedImage()
	if pinned == "" {
		return nil
	}
	s := &imageStatusJSON{Pinned: pinned}
	if cfg.Image != "" && cfg.Image != images.NameVMDock {
		return s // an image the user named: no default to compare with
	}
	d, err := images.ResolveDefault(ctx, cfg.Arch, images.Options{BaseURL: cfg.ImageBaseURL, Offline: true})
	if err != nil {
		return s
	}
	// A local build whose digest is unknown changed since it was cached.
	if (d.Digest != "" && d.Digest != pinned) || (d.Digest == "" && d.Source == images.SourceLocalBuild) {
		s.Newer = &d
	}
	return s
}

func (s *imageStatusJSON) line() string {
	line := s.Pinned
	if n := s.Newer; n != nil {
		what := n.Digest
		if what == "" {
			what = n.Path
		}
		line += fmt.Sprintf("; newer %s image: %s (`vmdock start --upgrade-image` after a stop; the data disk is kept)", n.Source, what)
	}
	return line
}
