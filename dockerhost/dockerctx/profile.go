package dockerctx

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// Profile is one vmdock profile's docker context and the file where the
// context it replaced is remembered (the instance's state.json), so that
// whoever ends the instance, `vmdock stop` or a host agent whose guest
// powered itself off, can put that context back.
type Profile struct {
	Name      string // vmdock profile
	Socket    string // host end of the instance's docker.sock tunnel
	StatePath string
}

// profileState is what state.json holds.
type profileState struct {
	// PreviousContext was current before start switched to ours.
	PreviousContext string `json:"previousContext,omitempty"`
}

func (p Profile) load() profileState {
	var s profileState
	if b, err := os.ReadFile(p.StatePath); err == nil {
		json.Unmarshal(b, &s)
	}
	return s
}

func (p Profile) save(s profileState) error {
	b, _ := json.MarshalIndent(s, "", "  ")
	return atomicfile.WriteFile(p.StatePath, b, 0o600)
}

// Activate creates or updates the profile's context and, when use is set,
// makes it current, remembering the one it replaces. A restart while ours
// is already current keeps the remembered one.
func (p Profile) Activate(use bool) error {
	name := Name(p.Name)
	if err := Ensure(name, "unix://"+p.Socket, fmt.Sprintf("vmdock profile %s", p.Name)); err != nil {
		return fmt.Errorf("docker context %s: %w", name, err)
	}
	if !use {
		return nil
	}
	alreadyOurs := Current() == name
	prev, err := Activate(name)
	if err != nil {
		return fmt.Errorf("switch docker context to %s: %w", name, err)
	}
	if !alreadyOurs {
		s := p.load()
		s.PreviousContext = prev
		if err := p.save(s); err != nil {
			return fmt.Errorf("remember previous docker context: %w", err)
		}
	}
	return nil
}

// Restore switches back to the remembered context, but only if ours is
// still current: a user who switched away by hand keeps their choice.
// Failures are logged: restoring never stops a stop.
func (p Profile) Restore() {
	s := p.load()
	if s.PreviousContext == "" {
		return
	}
	if err := Restore(s.PreviousContext, Name(p.Name)); err != nil {
		slog.Warn("restore docker context", "context", s.PreviousContext, "err", err)
		return
	}
	s.PreviousContext = ""
	if err := p.save(s); err != nil && !errors.Is(err, os.ErrNotExist) {
		slog.Warn("save state", "err", err)
	}
}

// Remove deletes the profile's context (`vmdock delete`).
func (p Profile) Remove() {
	if err := Remove(Name(p.Name)); err != nil {
		slog.Warn("remove docker context", "err", err)
	}
}
