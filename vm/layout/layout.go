package layout

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/internal/fsutil"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/store"
)

// The formats of an instance folder, oldest first. Folders of the first
// three carry no record; Detect tells them apart by the records they hold.
const (
	// FormatNoRuntime: the config, the disks and logs; the data disk's
	// runtime is implicit (docker, the only one then).
	FormatNoRuntime = 1
	// FormatNoNetStack adds data.runtime, the image pin, the saved VM
	// state and the vz identity files; the network stack an instance ran
	// is implicit (its VM type's own).
	FormatNoNetStack = 2
	// FormatUnversioned adds network.stack; the folder has no format
	// record yet.
	FormatUnversioned = 3
	// FormatRecorded adds the format record itself.
	FormatRecorded = 4
)

// Current is the format this vmdock writes and reads.
const Current = FormatRecorded

// Record is what the format file holds.
type Record struct {
	Format int `json:"format"`
	// WrittenBy is the vmdock version that made the folder this format.
	WrittenBy string `json:"writtenBy"`
}

// maxRecordBytes caps what is read of a format file: a real one is a
// line.
const maxRecordBytes = 4 << 10

// Path is the format record of inst.
func Path(inst *store.Instance) string { return inst.FormatPath() }

// Read returns the folder's record; ok is false when it has none (a
// folder of a format before FormatRecorded, or no folder at all).
func Read(inst *store.Instance) (rec Record, ok bool, err error) {
	b, err := fsutil.ReadFileMax(Path(inst), maxRecordBytes)
	if errors.Is(err, os.ErrNotExist) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("instance folder format record %s: %w", Path(inst), err)
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.Format < 1 {
		return Record{}, false, fmt.Errorf("instance folder format record %s is damaged (%q); accepted: {\"format\": N, \"writtenBy\": VERSION} (restore it, or move the folder away)", Path(inst), strings.TrimSpace(string(b)))
	}
	return rec, true, nil
}

// Detect is the format of inst's folder: its record, else the format of
// the records it holds. A folder without a record is read the way the
// code of its format read it, so a guess too old only runs steps that
// find nothing to add.
func Detect(inst *store.Instance) (int, error) {
	rec, ok, err := Read(inst)
	if err != nil || ok {
		return rec.Format, err
	}
	switch {
	case !fsutil.Exists(inst.DataRuntimePath()) && fsutil.Exists(inst.DataDiskPath()):
		return FormatNoRuntime, nil
	case !fsutil.Exists(inst.NetStackPath()) && fsutil.Exists(inst.DiskPath()):
		return FormatNoNetStack, nil
	}
	return FormatUnversioned, nil
}

// NewerError is Check's error for a folder made by a newer vmdock.
type NewerError struct {
	Profile string
	Record  Record
	Version string // this vmdock's
}

func (e *NewerError) Error() string {
	by := e.Record.WrittenBy
	if by == "" {
		by = "a newer version"
	}
	return fmt.Sprintf("profile %q was made by vmdock %s, upgrade: its instance folder is format %d and this vmdock (%s) reads formats up to %d; nothing was changed",
		e.Profile, by, e.Record.Format, e.Version, Current)
}

// Check refuses a folder this vmdock (version) cannot read: one of a
// newer format, or a damaged record. It only reads.
func Check(inst *store.Instance, version string) error {
	rec, ok, err := Read(inst)
	if err != nil {
		return err
	}
	if ok && rec.Format > Current {
		return &NewerError{Profile: inst.Name, Record: rec, Version: version}
	}
	return nil
}

// step brings a folder of format from to from+1. It adds files and says
// which (so a later failure can take them away), and never overwrites
// one.
type step struct {
	from int
	run  func(inst *store.Instance) (added []string, err error)
}

// steps holds one step from each older format.
var steps = []step{
	{FormatNoRuntime, recordDataRuntime},
	{FormatNoNetStack, recordNetStack},
	{FormatUnversioned, func(*store.Instance) ([]string, error) { return nil, nil }},
}

// Migrate brings inst's folder to Current and records it as written by
// version; an empty folder (a new instance) just gets the record. The
// caller holds the profile lock. On failure the files the steps added are
// removed again, so the folder is as it was.
func Migrate(inst *store.Instance, version string) (from int, err error) {
	if err := Check(inst, version); err != nil {
		return 0, err
	}
	from, err = Detect(inst)
	if err != nil {
		return 0, err
	}
	if from == Current {
		return from, nil
	}
	var added []string
	defer func() {
		if err != nil {
			for _, p := range added {
				os.Remove(p)
			}
		}
	}()
	for _, s := range steps {
		if s.from < from {
			continue
		}
		a, err := s.run(inst)
		added = append(added, a...)
		if err != nil {
			return from, fmt.Errorf("migrate instance folder %s from format %d to %d: %w (the folder is left as it was)", inst.Dir, s.from, s.from+1, err)
		}
	}
	b, _ := json.Marshal(Record{Format: Current, WrittenBy: version})
	if err := atomicfile.WriteFile(Path(inst), append(b, '\n'), 0o600); err != nil {
		return from, fmt.Errorf("migrate instance folder %s: record format %d: %w (the folder is left as it was)", inst.Dir, Current, err)
	}
	return from, nil
}

// addFile writes a record that is not there yet.
func addFile(path, content string) ([]string, error) {
	if fsutil.Exists(path) {
		return nil, nil
	}
	if err := atomicfile.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
		return nil, err
	}
	return []string{path}, nil
}

// recordDataRuntime writes down what a data disk made before the record
// was kept holds: docker's images and containers, the only runtime then.
func recordDataRuntime(inst *store.Instance) ([]string, error) {
	if !fsutil.Exists(inst.DataDiskPath()) {
		return nil, nil
	}
	return addFile(inst.DataRuntimePath(), "docker")
}

// recordNetStack writes down the network an instance booted before the
// record was kept ran on: its VM type's own (slirp, vznat), the only one
// then. An instance never booted (no root disk) gets the default at its
// first start, as before.
func recordNetStack(inst *store.Instance) ([]string, error) {
	if !fsutil.Exists(inst.DiskPath()) {
		return nil, nil
	}
	vmType, err := configVMType(inst)
	if err != nil || vmType == "" {
		// Without a vmType the stack follows from the host's default
		// VM type when the config is loaded, as it did before.
		return nil, err
	}
	return addFile(inst.NetStackPath(), driver.OwnNetStack(vmType))
}

// configVMType is the vmType the instance's config names, "" when it
// names none or has no config; the rest of the config is not this
// package's business.
func configVMType(inst *store.Instance) (string, error) {
	b, err := fsutil.ReadFileMax(inst.ConfigPath(), 1<<20)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read config: %w", err)
	}
	var c struct {
		VMType string `yaml:"vmType"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		// The config's own loader reports what is wrong with it.
		return "", nil
	}
	return c.VMType, nil
}
