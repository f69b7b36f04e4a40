package migrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// record is what migrate keeps in the instance folder between runs:
// volumes whose copy started and did not finish (their contents are
// vmdock's own, so the next run replaces them whole) and volumes copied
// to the end (found again, they are already there).
type record struct {
	path       string
	Unfinished []string `json:"unfinished,omitempty"`
	Copied     []string `json:"copied,omitempty"`
}

func loadRecord(path string) (*record, error) {
	r := &record{path: path}
	if path == "" {
		return r, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the migrate record: %w", err)
	}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("read the migrate record %s: %w", path, err)
	}
	return r, nil
}

func (r *record) unfinished(volume string) bool { return slices.Contains(r.Unfinished, volume) }
func (r *record) copied(volume string) bool     { return slices.Contains(r.Copied, volume) }

// start marks volume's copy as begun, before a byte reaches the target.
func (r *record) start(volume string) error {
	r.Copied = slices.DeleteFunc(r.Copied, func(v string) bool { return v == volume })
	if !r.unfinished(volume) {
		r.Unfinished = append(r.Unfinished, volume)
	}
	return r.save()
}

// finish marks volume's copy as complete.
func (r *record) finish(volume string) error {
	r.Unfinished = slices.DeleteFunc(r.Unfinished, func(v string) bool { return v == volume })
	if !r.copied(volume) {
		r.Copied = append(r.Copied, volume)
	}
	return r.save()
}

func (r *record) save() error {
	if r.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(r.path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the migrate record: %w", err)
	}
	return nil
}
