package migrate

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"
)

// externalMount tells where a volume's files live when its local-driver
// options mount something instead of a folder of the engine's own: the
// folder it binds (bind true), or the device or network share it mounts.
// "" is a plain volume, whose files are copied.
func externalMount(v volume) (device string, bind bool) {
	if v.Driver != "local" && v.Driver != "" {
		return "", false
	}
	device = v.Options["device"]
	if device == "" {
		return "", false
	}
	for _, o := range strings.Split(v.Options["o"], ",") {
		if o == "bind" || o == "rbind" {
			return device, true
		}
	}
	return device, false
}

// externalVolume handles a volume that mounts something. Its files are
// never copied: into a bind they would land on the folder named by the
// source (a hostile one names / or the user's home; a benign one is the
// folder the copy reads, cut short by its own writes). A bind of a folder
// vmdock shares is created again as the same bind, so its containers see
// the same files; anything else is skipped with the reason.
func (r *run) externalVolume(ctx context.Context, v volume, device string, bind bool) (result, detail string, err error) {
	if !bind {
		return Skipped, fmt.Sprintf("it mounts %s (type %s) on the source, not a folder of the engine's: not copied; create it by hand if vmdock can reach it", device, v.Options["type"]), nil
	}
	if r.opts.BindAllowed == nil || !r.opts.BindAllowed(device) {
		return Skipped, fmt.Sprintf("it binds %s on the source, outside vmdock's shares: not copied; add the folder to mounts in the profile's config and run again", device), nil
	}
	var existing volume
	err = r.opts.Target.Call(ctx, http.MethodGet, "/volumes/"+url.PathEscape(v.Name), nil, nil, &existing)
	switch {
	case err == nil && existing.Driver == v.Driver && maps.Equal(existing.Options, v.Options):
		return Present, "", nil
	case err == nil:
		return "", "", fmt.Errorf("the target already has a volume %s that is not the bind of %s: remove it there to create the bind", v.Name, device)
	case !isNotFound(err):
		return "", "", fmt.Errorf("look up the volume on the target: %w", err)
	case r.opts.DryRun:
		return Planned, "a bind of " + device + ", a vmdock share", nil
	}
	if err := r.createTargetVolume(ctx, v, ""); err != nil {
		return "", "", err
	}
	return Copied, "created as the same bind of " + device + ", a vmdock share: nothing copied", nil
}
