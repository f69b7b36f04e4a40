package migrate

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// containerInspect is GET /containers/{id}/json; Config and HostConfig
// stay maps so every field travels, known to this code or not.
type containerInspect struct {
	ID              string `json:"Id"`
	Name            string
	Image           string
	Config          map[string]any
	HostConfig      map[string]any
	NetworkSettings struct{ Networks map[string]endpoint }
}

type endpoint struct {
	Aliases    []string       `json:",omitempty"`
	IPAMConfig map[string]any `json:",omitempty"`
}

func inspectContainer(ctx context.Context, e *Engine, name string) (containerInspect, error) {
	var c containerInspect
	err := e.Call(ctx, http.MethodGet, "/containers/"+url.PathEscape(name)+"/json", nil, nil, &c)
	return c, err
}

// builtinNetworks come with every engine; they are never created.
var builtinNetworks = map[string]bool{"bridge": true, "host": true, "none": true, "default": true}

// ContainerSpec is what makes a recreated container the same one: what
// was asked of the engine, not the ID, creation time, default hostname,
// network IDs or mount points it chose.
type ContainerSpec struct {
	Name       string
	Config     map[string]any
	HostConfig map[string]any
	Networks   []string
}

// SpecOf is c's ContainerSpec.
func SpecOf(c containerInspect) ContainerSpec {
	cfg := map[string]any{}
	for k, v := range c.Config {
		cfg[k] = v
	}
	if h, _ := cfg["Hostname"].(string); h != "" && strings.HasPrefix(c.ID, h) {
		delete(cfg, "Hostname")
	}
	var nets []string
	for n := range c.NetworkSettings.Networks {
		nets = append(nets, n)
	}
	sort.Strings(nets)
	return ContainerSpec{Name: strings.TrimPrefix(c.Name, "/"), Config: cfg, HostConfig: c.HostConfig, Networks: nets}
}

// containers recreates every source container, stopped.
func (r *run) containers(ctx context.Context) error {
	list, err := listContainers(ctx, r.opts.Source)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Names[0] < list[j].Names[0] })
	for i, c := range list {
		it := Item{Kind: "container", Name: strings.TrimPrefix(c.Names[0], "/")}
		r.progress(Event{Kind: it.Kind, Name: it.Name, Index: i + 1, Total: len(list)})
		res, err := r.container(ctx, c.ID)
		if err != nil {
			if err := r.failure(ctx, it, err, i+1, len(list)); err != nil {
				return err
			}
			continue
		}
		it.Result = res
		r.done(it, i+1, len(list))
	}
	return nil
}

// container recreates one source container on the target.
func (r *run) container(ctx context.Context, id string) (string, error) {
	src, err := inspectContainer(ctx, r.opts.Source, id)
	if err != nil {
		return "", fmt.Errorf("inspect on the source: %w", err)
	}
	spec := SpecOf(src)
	existing, err := inspectContainer(ctx, r.opts.Target, spec.Name)
	switch {
	case err == nil && r.sameContainer(existing, spec):
		return Present, nil
	case err == nil:
		return "", fmt.Errorf("the target already has a container named %s with another configuration: rename or remove one of them", spec.Name)
	case !isNotFound(err):
		return "", fmt.Errorf("look up the name on the target: %w", err)
	}
	if err := r.checkContainer(ctx, src, spec); err != nil {
		return "", err
	}
	if r.opts.DryRun {
		return Planned, nil
	}
	for _, n := range spec.Networks {
		if err := r.ensureNetwork(ctx, n); err != nil {
			return "", err
		}
	}
	newID, err := r.createContainer(ctx, src, spec)
	if err != nil {
		return "", err
	}
	return Copied, r.record.created(spec.Name, newID, specDigest(spec))
}

// checkContainer refuses what cannot be recreated faithfully: an image
// without a tag, an image not on the target, a bind outside the shares.
func (r *run) checkContainer(ctx context.Context, src containerInspect, spec ContainerSpec) error {
	image, _ := spec.Config["Image"].(string)
	img, err := inspectImage(ctx, r.opts.Source, image)
	if err != nil || img.ID != src.Image || strings.HasPrefix(image, "sha256:") || len(img.RepoTags) == 0 {
		return fmt.Errorf("it runs on the untagged image %s: tag it on the source (docker tag) and migrate again", shortID(src.Image))
	}
	if _, err := inspectImage(ctx, r.opts.Target, image); err != nil {
		if isNotFound(err) && !r.opts.DryRun {
			return fmt.Errorf("its image %s is not on the target: migrate it with --images", image)
		}
		if !isNotFound(err) {
			return fmt.Errorf("look up its image on the target: %w", err)
		}
	}
	for _, p := range bindSources(spec.HostConfig) {
		if r.opts.BindAllowed != nil && !r.opts.BindAllowed(p) {
			return fmt.Errorf("it binds %s, which is outside vmdock's shares: add the folder to mounts in the profile's config, or drop the bind", p)
		}
	}
	if held := privileges(spec.HostConfig); len(held) > 0 && !r.opts.AllowPrivileged {
		return fmt.Errorf("it holds more than a plain container (%s): recreate it by hand, or pass --allow-privileged", strings.Join(held, ", "))
	}
	return nil
}

// privileges are what hostConfig grants beyond a plain container: in the
// VM each reaches the VM itself (its disk, its processes, the shares).
func privileges(hc map[string]any) []string {
	var out []string
	if b, _ := hc["Privileged"].(bool); b {
		out = append(out, "privileged")
	}
	for _, d := range anyList(hc["Devices"]) {
		m, _ := d.(map[string]any)
		out = append(out, fmt.Sprintf("device %v", m["PathOnHost"]))
	}
	if rules := anyList(hc["DeviceCgroupRules"]); len(rules) > 0 {
		out = append(out, fmt.Sprintf("device rules %v", rules))
	}
	for _, ns := range []string{"PidMode", "IpcMode", "UTSMode", "UsernsMode"} {
		if mode, _ := hc[ns].(string); mode == "host" {
			out = append(out, strings.ToLower(strings.TrimSuffix(ns, "Mode"))+"=host")
		}
	}
	for _, c := range anyList(hc["CapAdd"]) {
		out = append(out, fmt.Sprintf("cap-add %v", c))
	}
	for _, o := range anyList(hc["SecurityOpt"]) {
		if s, _ := o.(string); unconfined(s) {
			out = append(out, "security-opt "+s)
		}
	}
	return out
}

func anyList(v any) []any {
	l, _ := v.([]any)
	return l
}

// unconfined reports whether a security option turns confinement off
// (seccomp, AppArmor, SELinux labels, masked /proc and /sys paths).
func unconfined(opt string) bool {
	k, v, ok := strings.Cut(opt, "=")
	if !ok {
		k, v, _ = strings.Cut(opt, ":")
	}
	switch k {
	case "seccomp", "apparmor", "systempaths":
		return v == "unconfined"
	case "label":
		return v == "disable"
	}
	return false
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// bindSources are the host folders hostConfig binds, from Binds
// ("/src:/dst[:opts]"), from Mounts of type bind, and from Mounts of
// volumes whose local-driver options bind a folder (type=none o=bind
// device=/path) or mount a device.
func bindSources(hostConfig map[string]any) []string {
	var out []string
	binds, _ := hostConfig["Binds"].([]any)
	for _, b := range binds {
		s, _ := b.(string)
		if src, _, ok := strings.Cut(s, ":"); ok && strings.HasPrefix(src, "/") {
			out = append(out, src)
		}
	}
	mounts, _ := hostConfig["Mounts"].([]any)
	for _, m := range mounts {
		mm, _ := m.(map[string]any)
		if mm["Type"] == "bind" {
			if src, _ := mm["Source"].(string); src != "" {
				out = append(out, src)
			}
		}
		vo, _ := mm["VolumeOptions"].(map[string]any)
		dc, _ := vo["DriverConfig"].(map[string]any)
		opts, _ := dc["Options"].(map[string]any)
		if dev, _ := opts["device"].(string); strings.HasPrefix(dev, "/") {
			out = append(out, dev)
		}
	}
	return out
}

// createContainer creates the container on the target, stopped, on its
// first network, then connects it to the others.
func (r *run) createContainer(ctx context.Context, src containerInspect, spec ContainerSpec) (string, error) {
	body := map[string]any{}
	for k, v := range spec.Config {
		body[k] = v
	}
	body["HostConfig"] = spec.HostConfig
	mode, _ := spec.HostConfig["NetworkMode"].(string)
	first := ""
	if _, ok := src.NetworkSettings.Networks[mode]; ok && !builtinNetworks[mode] {
		first = mode
	}
	if first != "" {
		body["NetworkingConfig"] = map[string]any{"EndpointsConfig": map[string]any{first: endpointConfig(src, first)}}
	}
	var created struct {
		ID string `json:"Id"`
	}
	if err := r.opts.Target.Call(ctx, http.MethodPost, "/containers/create", url.Values{"name": {spec.Name}}, body, &created); err != nil {
		return "", fmt.Errorf("create on the target: %w", err)
	}
	for _, n := range spec.Networks {
		if n == first || n == mode || builtinNetworks[n] {
			continue
		}
		conn := map[string]any{"Container": created.ID, "EndpointConfig": endpointConfig(src, n)}
		if err := r.opts.Target.Call(ctx, http.MethodPost, "/networks/"+url.PathEscape(n)+"/connect", nil, conn, nil); err != nil {
			return "", fmt.Errorf("connect to network %s on the target: %w", n, err)
		}
	}
	return created.ID, nil
}

// endpointConfig is what the container asked of network n: its aliases
// (without the one docker adds, the short ID) and fixed addresses.
func endpointConfig(src containerInspect, n string) endpoint {
	ep := src.NetworkSettings.Networks[n]
	var aliases []string
	for _, a := range ep.Aliases {
		if !strings.HasPrefix(src.ID, a) {
			aliases = append(aliases, a)
		}
	}
	return endpoint{Aliases: aliases, IPAMConfig: ep.IPAMConfig}
}
