package migrate

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
)

// checkFits refuses a copy of size bytes the target has no room for,
// before it starts: a copy that fills the disk fails anyway, and leaves
// the VM's disk full. A size or free space not known lets the copy go.
func (r *run) checkFits(ctx context.Context, size int64) error {
	if r.opts.TargetFree == nil || size <= 0 {
		return nil
	}
	free, err := r.opts.TargetFree(ctx)
	if err != nil {
		slog.Warn("free space on the target", "err", err)
		return nil
	}
	if size > free {
		return fmt.Errorf("it needs %s and the target's disk has %s free: free space there (docker system prune) or grow the disk", sizeText(size), sizeText(free))
	}
	return nil
}

// sourceVolumeSizes are the source's volume sizes by name, as far as its
// GET /system/df knows them (volumes only, where the engine can tell
// them apart); asked only when the target's free space can be known, as
// the engine walks every volume for it.
func (r *run) sourceVolumeSizes(ctx context.Context) map[string]int64 {
	sizes := map[string]int64{}
	if r.opts.TargetFree == nil {
		return sizes
	}
	var df struct {
		Volumes []struct {
			Name      string
			UsageData struct{ Size int64 }
		}
	}
	if err := r.opts.Source.Call(ctx, http.MethodGet, "/system/df", url.Values{"type": {"volume"}}, nil, &df); err != nil {
		slog.Warn("volume sizes on the source", "err", err)
		return sizes
	}
	for _, v := range df.Volumes {
		sizes[v.Name] = v.UsageData.Size
	}
	return sizes
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
