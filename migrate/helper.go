package migrate

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"
)

// HelperPrefix starts the name of every container migrate creates to
// reach a volume's files; such containers are never started and always
// removed, and a container list skips them.
const HelperPrefix = "vmdock-migrate-"

// helperImageTag names the empty image loaded on an engine that has no
// image to create a helper from; it is removed with the helpers.
const helperImageTag = "vmdock-migrate-helper:empty"

// helpers creates and removes one engine's helper containers.
type helpers struct {
	engine      *Engine
	image       string
	loadedImage bool
	created     []string
}

// helperImage picks an image already on e (a never-started container
// runs nothing, so any image will do), else loads an empty one, built
// here, so no registry is needed.
func (h *helpers) helperImage(ctx context.Context) (string, error) {
	if h.image != "" {
		return h.image, nil
	}
	var list []imageSummary
	if err := h.engine.Call(ctx, http.MethodGet, "/images/json", nil, nil, &list); err != nil {
		return "", fmt.Errorf("list images for a helper: %w", err)
	}
	if len(list) > 0 {
		h.image = list[0].ID
		return h.image, nil
	}
	archive, err := emptyImageArchive()
	if err != nil {
		return "", err
	}
	resp, err := h.engine.Do(ctx, http.MethodPost, "/images/load", url.Values{"quiet": {"1"}}, bytes.NewReader(archive), "application/x-tar")
	if err != nil {
		return "", fmt.Errorf("load the empty helper image: %w", err)
	}
	loadErr := loadStreamError(resp.Body)
	resp.Body.Close()
	if loadErr != nil {
		return "", fmt.Errorf("load the empty helper image: %w", loadErr)
	}
	h.image, h.loadedImage = helperImageTag, true
	return h.image, nil
}

// emptyImageArchive is a `docker load` archive of an image with one empty
// layer and no command.
func emptyImageArchive() ([]byte, error) {
	layer := make([]byte, 1024) // an empty tar: two zero blocks
	layerSum := sha256.Sum256(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(layerSum[:])}},
	})
	if err != nil {
		return nil, err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": []string{helperImageTag}, "Layers": []string{"layer/layer.tar"},
	}})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{{configName, config}, {"layer/layer.tar", layer}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), tw.Close()
}

// volumeMountPath is where a helper sees the volume it reaches.
const volumeMountPath = "/vmdock-volume"

// create makes a never-started container that mounts volume at
// volumeMountPath.
func (h *helpers) create(ctx context.Context, volume string, readOnly bool) (string, error) {
	image, err := h.helperImage(ctx)
	if err != nil {
		return "", err
	}
	name := HelperPrefix + randomSuffix()
	body := map[string]any{
		"Image":      image,
		"Cmd":        []string{"/vmdock-migrate-helper-never-runs"},
		"Labels":     map[string]string{helperLabel: "1"},
		"HostConfig": map[string]any{"Mounts": []map[string]any{{"Type": "volume", "Source": volume, "Target": volumeMountPath, "ReadOnly": readOnly}}, "NetworkMode": "none"},
	}
	var created struct {
		ID string `json:"Id"`
	}
	if err := h.engine.Call(ctx, http.MethodPost, "/containers/create", url.Values{"name": {name}}, body, &created); err != nil {
		return "", fmt.Errorf("create helper container for volume %s: %w", volume, err)
	}
	h.created = append(h.created, created.ID)
	return created.ID, nil
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// helperLabel marks every helper container, so a run finds and removes
// the ones a killed run, or a request Ctrl-C cut after the engine made
// the container, left behind (each keeps its volume "in use").
const helperLabel = "vmdock.migrate.helper"

// removeAll removes every helper container, this run's and every other
// one the label marks, and the helper image, even when ctx is cancelled
// (Ctrl-C): the engines are left as they were.
func (h *helpers) removeAll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	h.removeContainers(ctx)
	var labelled []containerSummary
	q := url.Values{"all": {"1"}, "filters": {`{"label":["` + helperLabel + `=1"]}`}}
	if err := h.engine.Call(ctx, http.MethodGet, "/containers/json", q, nil, &labelled); err != nil {
		slog.Warn("list migrate helper containers", "err", err)
	}
	for _, c := range labelled {
		h.remove(ctx, c.ID)
	}
	// The image may be one a killed run loaded; a container of the
	// user's that runs it keeps it (the engine refuses, 409).
	if err := h.engine.Call(ctx, http.MethodDelete, "/images/"+url.PathEscape(helperImageTag), nil, nil, nil); err != nil && !isNotFound(err) && !isConflict(err) {
		slog.Warn("remove the migrate helper image", "err", err)
	}
	h.image, h.loadedImage = "", false
}

// removeContainers removes the helper containers made so far, even when
// ctx is cancelled.
func (h *helpers) removeContainers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, id := range h.created {
		h.remove(ctx, id)
	}
	h.created = nil
}

func (h *helpers) remove(ctx context.Context, id string) {
	if err := h.engine.Call(ctx, http.MethodDelete, "/containers/"+url.PathEscape(id), url.Values{"force": {"1"}, "v": {"0"}}, nil, nil); err != nil && !isNotFound(err) {
		slog.Warn("remove a migrate helper container", "id", id, "err", err)
	}
}

// isHelperName reports whether a container name (as listed, "/name") is
// one of migrate's helpers.
func isHelperName(name string) bool {
	return strings.HasPrefix(strings.TrimPrefix(name, "/"), HelperPrefix)
}
