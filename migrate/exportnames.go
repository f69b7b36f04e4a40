package migrate

import (
	"encoding/json"
	"path"
	"slices"
	"strings"
)

// filterNames is an export's index file (manifest.json, repositories or
// index.json) with only the names in keep; configs learns each kept tag's
// config digest from manifest.json.
func filterNames(file string, b []byte, keep []string, configs map[string]string) ([]byte, error) {
	kept := func(name string) bool { return slices.Contains(keep, familiarName(name)) }
	switch file {
	case "manifest.json":
		return filterManifest(b, kept, configs)
	case "repositories":
		var repos map[string]map[string]json.RawMessage
		if err := json.Unmarshal(b, &repos); err != nil {
			return nil, err
		}
		for repo, tags := range repos {
			for tag := range tags {
				if !kept(repo + ":" + tag) {
					delete(tags, tag)
				}
			}
			if len(tags) == 0 {
				delete(repos, repo)
			}
		}
		return json.Marshal(repos)
	}
	return filterIndex(b, kept)
}

// filterManifest keeps manifest.json's entries and tags that kept takes;
// every other field of an entry travels as it came.
func filterManifest(b []byte, kept func(string) bool, configs map[string]string) ([]byte, error) {
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, err
	}
	out := entries[:0]
	for _, e := range entries {
		var config string
		var tags, keptTags []string
		_ = json.Unmarshal(e["Config"], &config)
		_ = json.Unmarshal(e["RepoTags"], &tags)
		for _, t := range tags {
			if kept(t) {
				keptTags = append(keptTags, t)
				configs[familiarName(t)] = "sha256:" + strings.TrimSuffix(path.Base(config), ".json")
			}
		}
		if len(keptTags) == 0 {
			continue
		}
		raw, err := json.Marshal(keptTags)
		if err != nil {
			return nil, err
		}
		e["RepoTags"] = raw
		out = append(out, e)
	}
	return json.Marshal(out)
}

// imageNameAnnotation names an OCI index entry's image (a full reference).
const imageNameAnnotation = "io.containerd.image.name"

// filterIndex keeps index.json's entries that name no image or one kept
// takes.
func filterIndex(b []byte, kept func(string) bool) ([]byte, error) {
	var index map[string]json.RawMessage
	if err := json.Unmarshal(b, &index); err != nil {
		return nil, err
	}
	var manifests []map[string]json.RawMessage
	if err := json.Unmarshal(index["manifests"], &manifests); err != nil {
		return nil, err
	}
	out := manifests[:0]
	for _, m := range manifests {
		var ann map[string]string
		_ = json.Unmarshal(m["annotations"], &ann)
		if name, ok := ann[imageNameAnnotation]; ok && !kept(name) {
			continue
		}
		out = append(out, m)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	index["manifests"] = raw
	return json.Marshal(index)
}

// familiarName is a reference as the engine lists it: docker.io/library/
// and docker.io/ left out.
func familiarName(ref string) string {
	for _, p := range []string{"docker.io/library/", "docker.io/"} {
		if rest, ok := strings.CutPrefix(ref, p); ok {
			return rest
		}
	}
	return ref
}
