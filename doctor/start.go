package doctor

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/sockpath"
)

// checkConfig judges the config a start would run against this host, the
// same way `vmdock start` does before it writes anything.
func checkConfig(_ context.Context, f Facts) Result {
	if f.ConfigErr != nil {
		return fail("correct the file the message names (`vmdock template --edit` for the template)", "%v", f.ConfigErr)
	}
	c := f.Config
	if err := c.ValidateOn(f.Host); err != nil {
		return fail("change it with `vmdock start` flags (saved to the config) or edit the file",
			"%s is not accepted on this host: %v", f.ConfigSource, err)
	}
	summary := fmt.Sprintf("%s: %s, %s guest, %d CPUs, %g GiB, %s mounts, %s runtime",
		f.ConfigSource, c.VMType, c.Arch, c.CPUs, c.MemoryGiB, c.MountType, c.Runtime)
	if w := c.Warnings(); len(w) > 0 {
		return warn("see `vmdock status`", "%s; %s", summary, strings.Join(w, "; "))
	}
	return ok("%s", summary)
}

// imageTimeout bounds the release manifest fetch: a network that drops
// packets must not hang doctor.
const imageTimeout = 20 * time.Second

// checkImage says which image a default start would use and whether it
// needs the network for it.
func checkImage(ctx context.Context, f Facts) Result {
	c := f.Config
	if c.Image != "" {
		return ok("the config names image %q; a start fetches it unless it is cached (`vmdock image list`)", c.Image)
	}
	ctx, cancel := context.WithTimeout(ctx, imageTimeout)
	defer cancel()
	d, err := f.DefaultImage(ctx, c.Arch, c.ImageBaseURL)
	if err != nil {
		return fail("take one of the ways out the message names", "no %s image for a start: %v", c.Arch, err)
	}
	var what string
	switch d.Source {
	case images.SourceLocalBuild:
		what = "local build " + d.Path
	case images.SourceImport:
		what = "imported image " + shortDigest(d.Digest)
	default:
		what = d.URL
		if d.Release != nil && d.Release.Size > 0 {
			what += fmt.Sprintf(" (%s)", gib(uint64(d.Release.Size)))
		}
	}
	switch {
	case d.Cached:
		return ok("%s %s: cached, a start works offline", c.Arch, what)
	case d.Source == images.SourceDownload:
		return ok("%s %s: the first start downloads it", c.Arch, what)
	}
	return ok("%s %s: the first start copies it into the cache", c.Arch, what)
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// checkSockets: a long VMDOCK_HOME makes a socket path too long to bind,
// which surfaces late and obscurely (EINVAL from bind, or QEMU refusing).
// The paths are the ones `vmdock start` checks; the limit is the host's.
func checkSockets(_ context.Context, f Facts) Result {
	max := f.SunPathMax - 1 // the path's NUL takes the last byte
	paths := instance.SocketPaths(f.Instance, f.Config)
	if err := sockpath.Check(max, paths...); err != nil {
		return fail("set VMDOCK_HOME to a shorter folder (the default is ~/.vmdock), or use a shorter profile name", "%v", err)
	}
	longest := ""
	for _, p := range paths {
		if len(p) > len(longest) {
			longest = p
		}
	}
	return ok("longest %s: %d of %d bytes", longest, len(longest), max)
}

// Free space a start needs: the image (about 1.5 GiB compressed, more
// unpacked) and room for the sparse disks to grow into.
const (
	diskWarnBytes = 5 << 30
	diskFailBytes = 2 << 30
)

func checkDisk(_ context.Context, f Facts) Result {
	places := []struct{ what, path string }{{"image cache", f.CacheDir}, {"instances", filepath.Dir(f.Instance.Dir)}}
	status := OK
	var notes, errs []string
	for _, p := range places {
		if p.path == "" {
			errs = append(errs, p.what+": no folder could be named")
			continue
		}
		free, err := f.FreeBytes(p.path)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", p.what, err))
			continue
		}
		notes = append(notes, fmt.Sprintf("%s %s free (%s)", p.what, gib(free), p.path))
		switch {
		case free < diskFailBytes:
			status = Fail
		case free < diskWarnBytes && status == OK:
			status = Warn
		}
	}
	if len(errs) > 0 && status == OK {
		status = Warn
	}
	r := Result{Status: status, Message: strings.Join(append(notes, errs...), "; ")}
	switch status {
	case Fail:
		r.Fix = fmt.Sprintf("free at least %s: the image and the VM's disks need it (`vmdock image prune` drops unused images)", gib(diskWarnBytes))
	case Warn:
		r.Fix = fmt.Sprintf("keep %s free: the VM's sparse disks grow as containers write (`vmdock image prune` drops unused images)", gib(diskWarnBytes))
	}
	return r
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
