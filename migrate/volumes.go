package migrate

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// volume is what GET /volumes tells about one volume.
type volume struct {
	Name    string
	Driver  string
	Labels  map[string]string
	Options map[string]string
}

// anonymousVolume matches the names docker gives volumes nobody named.
var anonymousVolume = regexp.MustCompile(`^[0-9a-f]{64}$`)

func namedVolumes(ctx context.Context, e *Engine) ([]volume, error) {
	var list struct{ Volumes []volume }
	if err := e.Call(ctx, http.MethodGet, "/volumes", nil, nil, &list); err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	var out []volume
	for _, v := range list.Volumes {
		if !anonymousVolume.MatchString(v.Name) {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// containerSummary is one entry of GET /containers/json?all=1.
type containerSummary struct {
	ID     string `json:"Id"`
	Names  []string
	State  string
	Mounts []struct {
		Type string
		Name string
	}
}

func listContainers(ctx context.Context, e *Engine) ([]containerSummary, error) {
	var list []containerSummary
	if err := e.Call(ctx, http.MethodGet, "/containers/json", url.Values{"all": {"1"}}, nil, &list); err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	return withoutHelpers(list), nil
}

func withoutHelpers(list []containerSummary) []containerSummary {
	out := list[:0]
	for _, c := range list {
		if len(c.Names) == 0 || !isHelperName(c.Names[0]) {
			out = append(out, c)
		}
	}
	return out
}

// runningUsers maps a volume to the running containers that mount it.
func runningUsers(list []containerSummary) map[string][]containerSummary {
	users := map[string][]containerSummary{}
	for _, c := range list {
		if c.State != "running" {
			continue
		}
		for _, m := range c.Mounts {
			if m.Type == "volume" && m.Name != "" {
				users[m.Name] = append(users[m.Name], c)
			}
		}
	}
	return users
}

// volumes copies every named source volume the target lacks.
func (r *run) volumes(ctx context.Context) error {
	list, err := namedVolumes(ctx, r.opts.Source)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	containers, err := listContainers(ctx, r.opts.Source)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	users := runningUsers(containers)
	r.volumeSizes = r.sourceVolumeSizes(ctx)
	for i, v := range list {
		it := Item{Kind: "volume", Name: v.Name}
		r.progress(Event{Kind: it.Kind, Name: it.Name, Index: i + 1, Total: len(list)})
		var err error
		if dev, bind := externalMount(v); dev != "" {
			it.Result, it.Detail, err = r.externalVolume(ctx, v, dev, bind)
		} else {
			it.Result, it.Bytes, err = r.volume(ctx, v, users[v.Name], i+1, len(list))
		}
		if err != nil {
			if err := r.failure(ctx, it, err, i+1, len(list)); err != nil {
				return err
			}
			continue
		}
		if it.Result == Skipped && it.Detail == "" {
			it.Detail = "in use by running container(s) " + containerNames(users[v.Name]) + ": stop them or pass --stop-source"
		}
		r.done(it, i+1, len(list))
	}
	return nil
}

func containerNames(cs []containerSummary) string {
	names := make([]string, 0, len(cs))
	for _, c := range cs {
		if len(c.Names) > 0 {
			names = append(names, strings.TrimPrefix(c.Names[0], "/"))
		}
	}
	return strings.Join(names, ", ")
}

// volume copies one volume: its result, the bytes moved.
func (r *run) volume(ctx context.Context, v volume, running []containerSummary, index, total int) (string, int64, error) {
	plan, err := r.targetVolumePlan(ctx, v)
	if err != nil || plan == volumeThere {
		return Present, 0, err
	}
	if len(running) > 0 && !r.opts.StopSource {
		return Skipped, 0, nil
	}
	if err := r.checkFits(ctx, r.volumeSizes[v.Name]); err != nil {
		return "", 0, err
	}
	if r.opts.DryRun {
		return Planned, 0, nil
	}
	if len(running) > 0 {
		defer r.stopped.startAll(ctx)
		if err := r.stopped.stop(ctx, running); err != nil {
			return "", 0, err
		}
	}
	if plan == volumeReplace {
		if err := r.opts.Target.Call(ctx, http.MethodDelete, "/volumes/"+url.PathEscape(v.Name), nil, nil, nil); err != nil && !isNotFound(err) {
			return "", 0, fmt.Errorf("remove the target's volume to copy it again: %w", err)
		}
	}
	mark := ""
	if plan != volumeFill {
		mark = randomSuffix()
		if err := r.createTargetVolume(ctx, v, mark); err != nil {
			return "", 0, err
		}
	}
	var n int64
	err = r.record.start(v.Name, mark)
	if err == nil {
		n, err = r.copyVolume(ctx, v.Name, index, total)
	}
	if err != nil {
		if plan != volumeFill && ctx.Err() == nil {
			r.removeHalfCopy(ctx, v.Name)
		}
		return "", n, err
	}
	return Copied, n, r.record.finish(v.Name, mark)
}

// removeHalfCopy removes a volume this run created whose copy failed (a
// full disk most likely), so the space comes back. A copy cut by Ctrl-C
// stays, marked unfinished, for the next run to replace.
func (r *run) removeHalfCopy(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := r.opts.Target.Call(ctx, http.MethodDelete, "/volumes/"+url.PathEscape(name), nil, nil, nil); err != nil && !isNotFound(err) {
		slog.Warn("remove a half-copied volume", "volume", name, "err", err)
		return
	}
	if err := r.record.drop(name); err != nil {
		slog.Warn("forget a half-copied volume", "volume", name, "err", err)
	}
}

// volumePlan is what a volume's copy does with the target's volume.
type volumePlan int

const (
	volumeThere   volumePlan = iota // copied by an earlier run: nothing to do
	volumeCreate                    // absent: create it, then copy
	volumeFill                      // present and empty (a container made it): copy into it
	volumeReplace                   // our unfinished copy, or other contents under Overwrite: remove, create, copy
)

// targetMark is the copyLabel of the target's volume name: "" when it
// has none.
func (r *run) targetMark(ctx context.Context, name string) (string, error) {
	var existing volume
	if err := r.opts.Target.Call(ctx, http.MethodGet, "/volumes/"+url.PathEscape(name), nil, nil, &existing); err != nil {
		return "", fmt.Errorf("look up the volume on the target: %w", err)
	}
	return existing.Labels[copyLabel], nil
}

// targetVolumePlan decides what v's copy does on the target: an
// unfinished copy of ours (the volume the record names, by its mark) is
// replaced whole; a volume with other contents is kept (an
// error) unless Overwrite.
func (r *run) targetVolumePlan(ctx context.Context, v volume) (volumePlan, error) {
	mark, err := r.targetMark(ctx, v.Name)
	switch {
	case isNotFound(err):
		return volumeCreate, nil
	case err != nil:
		return 0, err
	case r.record.unfinished(v.Name, mark):
		return volumeReplace, nil
	case r.record.copied(v.Name, mark):
		return volumeThere, nil
	}
	empty, err := r.targetVolumeEmpty(ctx, v.Name)
	switch {
	case err != nil:
		return 0, err
	case empty:
		return volumeFill, nil
	case !r.opts.Overwrite:
		return 0, fmt.Errorf("the target already has a volume %s with other contents: remove it there or pass --overwrite", v.Name)
	}
	return volumeReplace, nil
}

// copyLabel marks a volume migrate created on the target, with a value
// of its own that the record keeps: only such a volume is ever replaced
// without Overwrite.
const copyLabel = "vmdock.migrate.copy"

// createTargetVolume makes v on the target with its driver, options and
// labels, and mark (when not "") as its copyLabel.
func (r *run) createTargetVolume(ctx context.Context, v volume, mark string) error {
	labels := maps.Clone(v.Labels)
	if mark != "" {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[copyLabel] = mark
	}
	body := map[string]any{"Name": v.Name, "Driver": v.Driver, "DriverOpts": v.Options, "Labels": labels}
	if err := r.opts.Target.Call(ctx, http.MethodPost, "/volumes/create", nil, body, nil); err != nil {
		return fmt.Errorf("create on the target: %w", err)
	}
	return nil
}

// targetVolumeEmpty reports whether the target's volume holds nothing
// but its root folder.
func (r *run) targetVolumeEmpty(ctx context.Context, name string) (bool, error) {
	id, err := r.target.create(ctx, name, true)
	if err != nil {
		return false, err
	}
	defer r.target.removeContainers(ctx)
	resp, err := r.opts.Target.Do(ctx, http.MethodGet, "/containers/"+id+"/archive", url.Values{"path": {volumeMountPath}}, nil, "")
	if err != nil {
		return false, fmt.Errorf("read the target's volume: %w", err)
	}
	defer resp.Body.Close()
	tr := tar.NewReader(resp.Body)
	for entries := 0; ; entries++ {
		_, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read the target's volume: %w", err)
		}
		if entries >= 1 {
			return false, nil
		}
	}
}

// copyVolume streams the volume's tree, owners, modes, times and links
// from a source helper's archive into a target helper's.
func (r *run) copyVolume(ctx context.Context, name string, index, total int) (int64, error) {
	defer r.source.removeContainers(ctx)
	defer r.target.removeContainers(ctx)
	src, err := r.source.create(ctx, name, true)
	if err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	dst, err := r.target.create(ctx, name, false)
	if err != nil {
		return 0, fmt.Errorf("target: %w", err)
	}
	resp, err := r.opts.Source.Do(ctx, http.MethodGet, "/containers/"+src+"/archive", url.Values{"path": {volumeMountPath}}, nil, "")
	if err != nil {
		return 0, fmt.Errorf("read from the source: %w", err)
	}
	defer resp.Body.Close()
	body := &progressReader{r: resp.Body, every: progressEvery, report: func(n int64) {
		r.progress(Event{Kind: "volume", Name: name, Index: index, Total: total, Bytes: n})
	}}
	// The archive's root is the mount point's own folder, so it lands on
	// the target's mount point, with the volume root's owner and mode.
	q := url.Values{"path": {"/"}, "copyUIDGID": {"1"}}
	put, err := r.opts.Target.Do(ctx, http.MethodPut, "/containers/"+dst+"/archive", q, body, "application/x-tar")
	if err != nil {
		return body.n, fmt.Errorf("write to the target: %w", err)
	}
	put.Body.Close()
	return body.n, nil
}

// progressEvery is how many bytes of a stream pass between two progress
// events.
const progressEvery = 4 << 20

// progressReader counts bytes and reports every `every` of them.
type progressReader struct {
	r      io.Reader
	n      int64
	every  int64
	next   int64
	report func(int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if p.n >= p.next+p.every {
		p.next = p.n
		p.report(p.n)
	}
	return n, err
}

// stoppedSet is the source containers this run stopped and has not
// started again; Run starts whatever is left on every return, also after
// a failed stop or Ctrl-C.
type stoppedSet struct {
	engine *Engine
	ids    []string
	names  map[string]string
}

// stop stops each of cs that runs. A container whose stop was cut (Ctrl-C,
// a lost connection) counts as stopped, as it may be, so it is started
// again too; one the engine refused to stop, or found stopped already
// (304), is not this run's to start.
func (s *stoppedSet) stop(ctx context.Context, cs []containerSummary) error {
	for _, c := range cs {
		name := containerNames([]containerSummary{c})
		if s.names == nil {
			s.names = map[string]string{}
		}
		s.names[c.ID] = name
		resp, err := s.engine.Do(ctx, http.MethodPost, "/containers/"+url.PathEscape(c.ID)+"/stop", nil, nil, "")
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				s.add(c.ID)
			}
			return fmt.Errorf("stop source container %s: %w", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			s.add(c.ID)
		}
	}
	return nil
}

func (s *stoppedSet) add(id string) {
	if !slices.Contains(s.ids, id) {
		s.ids = append(s.ids, id)
	}
}

// startAll starts again what stop stopped, even after a failure or
// Ctrl-C.
func (s *stoppedSet) startAll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, id := range s.ids {
		if err := s.engine.Call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/start", nil, nil, nil); err != nil {
			slog.Error("start a source container again", "container", s.names[id], "err", err)
		}
	}
	s.ids = nil
}
