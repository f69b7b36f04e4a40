package migrate

import (
	"context"
	"fmt"
	"strings"
)

// images moves every tagged source image the target lacks.
func (r *run) images(ctx context.Context) error {
	list, err := taggedImages(ctx, r.opts.Source)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	for i, img := range list {
		it := Item{Kind: "image", Name: strings.Join(img.Tags, ", ")}
		r.progress(Event{Kind: it.Kind, Name: it.Name, Index: i + 1, Total: len(list)})
		res, err := r.image(ctx, img, i+1, len(list))
		if err != nil {
			if err := r.failure(ctx, it, err, i+1, len(list)); err != nil {
				return err
			}
			continue
		}
		it.Result, it.Bytes = res.result, res.bytes
		r.done(it, i+1, len(list))
	}
	return nil
}

type imageResult struct {
	result string
	bytes  int64
}

// image moves one image's missing tags and checks the target's copy
// against the source's identity.
func (r *run) image(ctx context.Context, img taggedImage, index, total int) (imageResult, error) {
	src, err := inspectImage(ctx, r.opts.Source, img.ID)
	if err != nil {
		return imageResult{}, fmt.Errorf("inspect on the source: %w", err)
	}
	srcID := identityOf(src, r.srcCtrd, "")
	tags, err := missingTags(ctx, r.opts.Target, img, srcID, r.dstCtrd, r.opts.Overwrite)
	if err != nil {
		return imageResult{}, err
	}
	switch {
	case len(tags) == 0:
		return imageResult{result: Present}, nil
	}
	if err := r.checkFits(ctx, img.Size); err != nil {
		return imageResult{}, err
	}
	switch {
	case r.opts.DryRun:
		return imageResult{result: Planned, bytes: img.Size}, nil
	}
	report := func(n int64) {
		r.progress(Event{Kind: "image", Name: strings.Join(img.Tags, ", "), Index: index, Total: total, Bytes: n})
	}
	configDigest, n, err := streamImage(ctx, r.opts.Source, r.opts.Target, tags, report)
	if err != nil {
		return imageResult{bytes: n}, err
	}
	srcID = identityOf(src, r.srcCtrd, configDigest)
	got, err := inspectImage(ctx, r.opts.Target, tags[0])
	if err != nil {
		return imageResult{bytes: n}, fmt.Errorf("inspect on the target after the load: %w", err)
	}
	if !sameImage(srcID, identityOf(got, r.dstCtrd, "")) {
		return imageResult{bytes: n}, fmt.Errorf("the target's copy differs from the source: config %s, %d layers; want config %s, %d layers", got.ID, len(got.RootFS.Layers), srcID.ConfigDigest, len(srcID.DiffIDs))
	}
	return imageResult{result: Copied, bytes: n}, nil
}
