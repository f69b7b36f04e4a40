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
// target volumes whose copy started and did not finish (their contents
// are vmdock's own, so the next run replaces them whole) and volumes
// copied to the end (found again, they are already there). Each is the
// volume's name and the mark (copyLabel) migrate gave the target volume
// it created for the copy: a volume of that name made since (the user's
// own) has none, or another, and is never taken for the copy. A volume's
// creation time cannot serve: engines report the ctime of its folder,
// which the copy itself changes.
type record struct {
	path       string
	Unfinished []recordEntry `json:"unfinished,omitempty"`
	Copied     []recordEntry `json:"copied,omitempty"`
	// Containers are the containers migrate created on the target.
	Containers []containerEntry `json:"containers,omitempty"`
}

// containerEntry is a container migrate created: its name and ID on the
// target and the digest of what was asked of the engine for it.
type containerEntry struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	Spec string `json:"spec"`
}

type recordEntry struct {
	Name string `json:"name"`
	Mark string `json:"mark,omitempty"`
}

// UnmarshalJSON also reads an older record's plain names, which have no
// mark: such an unfinished entry never matches a volume.
func (e *recordEntry) UnmarshalJSON(b []byte) error {
	if json.Unmarshal(b, &e.Name) == nil {
		e.Mark = ""
		return nil
	}
	type plain recordEntry
	return json.Unmarshal(b, (*plain)(e))
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

func named(volume string) func(recordEntry) bool {
	return func(e recordEntry) bool { return e.Name == volume }
}

// unfinished reports whether the target's volume marked mark holds a
// copy of this volume that did not finish.
func (r *record) unfinished(volume, mark string) bool {
	return mark != "" && slices.Contains(r.Unfinished, recordEntry{volume, mark})
}

// copied reports whether the target's volume marked mark is a finished
// copy; an entry with no mark (an older record's, or a copy into an empty
// volume migrate did not create) is taken at its word: it only ever
// leaves the volume alone.
func (r *record) copied(volume, mark string) bool {
	return slices.ContainsFunc(r.Copied, func(e recordEntry) bool {
		return e.Name == volume && (e.Mark == "" || e.Mark == mark)
	})
}

// start marks volume's copy into the target's volume marked mark as
// begun, before a byte reaches it.
func (r *record) start(volume, mark string) error {
	r.Copied = slices.DeleteFunc(r.Copied, named(volume))
	r.Unfinished = append(slices.DeleteFunc(r.Unfinished, named(volume)), recordEntry{volume, mark})
	return r.save()
}

// finish marks volume's copy as complete.
func (r *record) finish(volume, mark string) error {
	r.Unfinished = slices.DeleteFunc(r.Unfinished, named(volume))
	r.Copied = append(slices.DeleteFunc(r.Copied, named(volume)), recordEntry{volume, mark})
	return r.save()
}

// drop forgets volume, whose copy this run removed.
func (r *record) drop(volume string) error {
	r.Unfinished = slices.DeleteFunc(r.Unfinished, named(volume))
	r.Copied = slices.DeleteFunc(r.Copied, named(volume))
	return r.save()
}

// container is what the record holds of the container name migrate
// created.
func (r *record) container(name string) (containerEntry, bool) {
	i := slices.IndexFunc(r.Containers, func(e containerEntry) bool { return e.Name == name })
	if i < 0 {
		return containerEntry{}, false
	}
	return r.Containers[i], true
}

// created notes the container migrate created as id from spec digest.
func (r *record) created(name, id, spec string) error {
	r.Containers = slices.DeleteFunc(r.Containers, func(e containerEntry) bool { return e.Name == name })
	r.Containers = append(r.Containers, containerEntry{Name: name, ID: id, Spec: spec})
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
