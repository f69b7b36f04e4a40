package migrate

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
)

// imageSummary is one entry of GET /images/json.
type imageSummary struct {
	ID       string `json:"Id"`
	RepoTags []string
	Size     int64
}

// imageInspect is what GET /images/{name}/json tells about an image.
type imageInspect struct {
	ID           string `json:"Id"`
	RepoTags     []string
	Created      string
	Architecture string
	Os           string
	RootFS       struct{ Layers []string }
}

// imageIdentity is what makes two engines' images the same image. The ID
// cannot: under Docker Desktop's containerd store it is the digest of the
// index or manifest, under the classic store the digest of the config, so
// the config digest and the layers' diff IDs are compared instead.
type imageIdentity struct {
	ConfigDigest string // "" when the engine's ID is not the config's digest
	DiffIDs      []string
}

// identityOf is inspect's identity; configDigest is the config's digest
// when known from an export, else the ID stands for it on a classic store.
func identityOf(in imageInspect, containerdStore bool, configDigest string) imageIdentity {
	id := imageIdentity{ConfigDigest: configDigest, DiffIDs: in.RootFS.Layers}
	if id.ConfigDigest == "" && !containerdStore {
		id.ConfigDigest = in.ID
	}
	return id
}

// sameImage reports whether a and b are one image: equal diff IDs, and
// equal config digests where both are known.
func sameImage(a, b imageIdentity) bool {
	if !slices.Equal(a.DiffIDs, b.DiffIDs) {
		return false
	}
	return a.ConfigDigest == "" || b.ConfigDigest == "" || a.ConfigDigest == b.ConfigDigest
}

// taggedImage is one source image and the tags it is known by.
type taggedImage struct {
	ID   string
	Tags []string
	Size int64
}

// taggedImages lists the engine's images that have a tag, tags sorted,
// images in the order of their first tag.
func taggedImages(ctx context.Context, e *Engine) ([]taggedImage, error) {
	var list []imageSummary
	if err := e.Call(ctx, http.MethodGet, "/images/json", nil, nil, &list); err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	var out []taggedImage
	for _, s := range list {
		var tags []string
		for _, t := range s.RepoTags {
			if t != "" && t != "<none>:<none>" {
				tags = append(tags, t)
			}
		}
		if len(tags) == 0 {
			continue
		}
		sort.Strings(tags)
		out = append(out, taggedImage{ID: s.ID, Tags: tags, Size: s.Size})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tags[0] < out[j].Tags[0] })
	return out, nil
}

func inspectImage(ctx context.Context, e *Engine, name string) (imageInspect, error) {
	var in imageInspect
	err := e.Call(ctx, http.MethodGet, "/images/"+url.PathEscape(name)+"/json", nil, nil, &in)
	return in, err
}

// engineInfo is what GET /info tells migrate about an engine.
type engineInfo struct {
	// ID names the engine itself, whatever socket reaches it.
	ID string
	// containerdStore says the engine keeps images in containerd (Docker
	// Desktop's default), where an image's ID is not its config's digest.
	containerdStore bool
}

func infoOf(ctx context.Context, e *Engine) (engineInfo, error) {
	var info struct {
		ID           string
		DriverStatus [][]string
	}
	if err := e.Call(ctx, http.MethodGet, "/info", nil, nil, &info); err != nil {
		return engineInfo{}, fmt.Errorf("engine info: %w", err)
	}
	out := engineInfo{ID: info.ID}
	for _, kv := range info.DriverStatus {
		if len(kv) == 2 && kv[0] == "driver-type" && strings.HasPrefix(kv[1], "io.containerd.snapshotter") {
			out.containerdStore = true
		}
	}
	return out, nil
}

// missingTags are img's tags the target lacks; a tag the target holds for
// another image is a clash, unless overwrite.
func missingTags(ctx context.Context, target *Engine, img taggedImage, src imageIdentity, targetCtrd, overwrite bool) ([]string, error) {
	var missing, clashes []string
	for _, tag := range img.Tags {
		in, err := inspectImage(ctx, target, tag)
		switch {
		case isNotFound(err):
			missing = append(missing, tag)
		case err != nil:
			return nil, fmt.Errorf("look up %s on the target: %w", tag, err)
		case !sameImage(src, identityOf(in, targetCtrd, "")):
			clashes = append(clashes, tag)
			missing = append(missing, tag)
		}
	}
	if len(clashes) > 0 && !overwrite {
		return nil, fmt.Errorf("tag %s already names another image on the target: remove it there or pass --overwrite", strings.Join(clashes, ", "))
	}
	return missing, nil
}

// streamImage moves the tags from source to target: the source's export
// is piped into the target's load, no temporary file, with every name but
// tags taken out of it on the way (see filterExport). It returns the
// config digest the export's manifest names for the first tag, and the
// bytes moved.
func streamImage(ctx context.Context, source, target *Engine, tags []string, report func(int64)) (string, int64, error) {
	q := url.Values{"names": tags}
	resp, err := source.Do(ctx, http.MethodGet, "/images/get", q, nil, "")
	if err != nil {
		return "", 0, fmt.Errorf("export %s: %w", tags[0], err)
	}
	defer resp.Body.Close()
	pr, pw := io.Pipe()
	manifest := make(chan manifestResult, 1)
	counter := &progressReader{r: resp.Body, every: progressEvery, report: report}
	go func() {
		m := filterExport(counter, pw, tags)
		pw.CloseWithError(m.err)
		manifest <- m
	}()
	load, err := target.Do(ctx, http.MethodPost, "/images/load", url.Values{"quiet": {"1"}}, pr, "application/x-tar")
	if err != nil {
		pr.CloseWithError(err)
		<-manifest
		return "", counter.n, fmt.Errorf("load %s: %w", tags[0], err)
	}
	loadErr := loadStreamError(load.Body)
	load.Body.Close()
	// A load that stopped reading before the archive's end had all it
	// wanted; the filter is let go.
	pr.Close()
	m := <-manifest
	if loadErr != nil {
		return "", counter.n, fmt.Errorf("load %s: %w", tags[0], loadErr)
	}
	if m.err != nil && !errors.Is(m.err, io.ErrClosedPipe) {
		return "", counter.n, fmt.Errorf("read the export of %s: %w", tags[0], m.err)
	}
	return m.configFor(tags[0]), counter.n, nil
}

// loadStreamError finds an error in a load's JSON message stream.
func loadStreamError(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}

// manifestResult is an export's manifest.json: config digest per tag.
type manifestResult struct {
	configs map[string]string
	err     error
}

func (m manifestResult) configFor(tag string) string { return m.configs[tag] }

// maxIndexBytes bounds an export's manifest.json, repositories and
// index.json, which are read whole to be filtered.
const maxIndexBytes = 16 << 20

// filterExport copies a `docker save` archive from r to w with every name
// not in keep taken out of its manifest.json, repositories and index.json:
// a source could name the target's own tags there (postgres:16), and a
// load applies every name it finds. It returns the config digest of each
// kept tag: the config file is "<hex>.json" (classic export) or
// "blobs/sha256/<hex>" (OCI layout).
func filterExport(r io.Reader, w io.Writer, keep []string) manifestResult {
	res := manifestResult{configs: map[string]string{}}
	tr, tw := tar.NewReader(r), tar.NewWriter(w)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			res.err = tw.Close()
			return res
		}
		if err != nil {
			res.err = err
			return res
		}
		name := path.Clean(h.Name)
		if h.Typeflag != tar.TypeReg || (name != "manifest.json" && name != "repositories" && name != "index.json") {
			if err := tw.WriteHeader(h); err != nil {
				res.err = err
				return res
			}
			if _, err := io.Copy(tw, tr); err != nil {
				res.err = err
				return res
			}
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxIndexBytes+1))
		if err == nil && len(b) > maxIndexBytes {
			err = fmt.Errorf("over %d bytes", maxIndexBytes)
		}
		if err == nil {
			b, err = filterNames(name, b, keep, res.configs)
		}
		if err != nil {
			res.err = fmt.Errorf("%s: %w", name, err)
			return res
		}
		h.Size = int64(len(b))
		if err := tw.WriteHeader(h); err != nil {
			res.err = err
			return res
		}
		if _, err := tw.Write(b); err != nil {
			res.err = err
			return res
		}
	}
}
