package resume

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/vm/driver"
)

// File names inside the state folder. The record is written last: a save
// cut short leaves no record, and so nothing to resume.
const (
	recordFile = "state.json"
	// StateFile is the VM state itself; the driver writes it.
	StateFile = "vm.state"
)

// Saved is the record of one saved VM state.
type Saved struct {
	Fingerprint Fingerprint `json:"fingerprint"`
	// State is what the driver wrote (format, size, checksum, and the
	// hypervisor and accelerator it must be loaded by).
	State driver.SavedState `json:"state"`
	At    time.Time         `json:"at"`
	// Took is how long the save took, pause to VM exit.
	Took time.Duration `json:"took"`
}

// StatePath is the state file in dir.
func StatePath(dir string) string { return filepath.Join(dir, StateFile) }

// Load reads the record in dir; os.ErrNotExist when there is none.
func Load(dir string) (*Saved, error) {
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return nil, err
	}
	var s Saved
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("saved state record %s: %w", filepath.Join(dir, recordFile), err)
	}
	return &s, nil
}

// Write records s in dir, after the state file is complete.
func (s *Saved) Write(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode saved state record: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, recordFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write saved state record: %w", err)
	}
	return nil
}

// Remove deletes the saved state in dir, if any.
func Remove(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove saved state %s: %w", dir, err)
	}
	return nil
}

// Exists reports whether dir holds a complete saved state.
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, recordFile))
	return err == nil
}

// Decide returns the saved state in dir when a start with fingerprint now
// may resume from it. Otherwise it returns nil and why not; the reason is
// empty when there is simply no saved state. The caller removes a state it
// does not resume: it goes stale with the cold boot.
func Decide(dir string, now Fingerprint) (*Saved, string) {
	s, err := Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ""
	}
	if err != nil {
		return nil, err.Error()
	}
	if why := s.Fingerprint.Differs(now); why != "" {
		return nil, why
	}
	if err := s.verify(dir); err != nil {
		return nil, err.Error()
	}
	return s, ""
}

// verify checks the state file against its record: a truncated or damaged
// file would load garbage into the guest's memory.
func (s *Saved) verify(dir string) error {
	f, err := os.Open(StatePath(dir))
	if err != nil {
		return fmt.Errorf("the saved state file is unreadable: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("the saved state file is unreadable: %w", err)
	}
	if n != s.State.Size {
		return fmt.Errorf("the saved state file is %d bytes, %d were saved (truncated or replaced)", n, s.State.Size)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != s.State.SHA256 {
		return errors.New("the saved state file does not match its checksum (damaged)")
	}
	return nil
}

// HashingWriter counts and hashes what passes through it, so the saver
// records size and checksum without reading the file back.
type HashingWriter struct {
	W io.Writer
	n int64
	h hashState
}

type hashState interface {
	io.Writer
	Sum([]byte) []byte
}

func (w *HashingWriter) Write(p []byte) (int, error) {
	if w.h == nil {
		w.h = sha256.New()
	}
	n, err := w.W.Write(p)
	w.h.Write(p[:n])
	w.n += int64(n)
	return n, err
}

// Size is the number of bytes written.
func (w *HashingWriter) Size() int64 { return w.n }

// SHA256 is the hex checksum of the bytes written.
func (w *HashingWriter) SHA256() string {
	if w.h == nil {
		w.h = sha256.New()
	}
	return hex.EncodeToString(w.h.Sum(nil))
}
