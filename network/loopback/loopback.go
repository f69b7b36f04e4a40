package loopback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// DefaultIP is the address containers use to reach the host.
const DefaultIP = "10.254.254.254"

// Manager adds, removes and reports the alias.
type Manager struct {
	Runner Runner
	// Query runs the read-only listing; nil means Runner. It lets status
	// work without sudo.
	Query Runner
	// Root prefixes the persistence file path ("" or "/" for the real
	// system); tests point it at a temp folder.
	Root string
	// StatePath records what Add did, so Remove undoes exactly that.
	StatePath string
	// Privileged: write persistence files directly. Otherwise they are
	// written through Runner (`tee`, `rm`), which runs them under sudo.
	Privileged bool
}

// Record is what Add did for one IP.
type Record struct {
	IP string `json:"ip"`
	// Added is false when the alias was already there: then Remove leaves
	// it, since somebody else put it there.
	Added bool `json:"added"`
	// PersistFile is the systemd unit or launchd plist Add installed.
	PersistFile string `json:"persistFile,omitempty"`
}

type state struct {
	Aliases []Record `json:"aliases"`
}

// Status is the alias as it is now and as vmdock recorded it.
type Status struct {
	IP        string  `json:"ip"`
	Present   bool    `json:"present"`            // on the loopback interface now
	Persisted bool    `json:"persisted"`          // the boot-time file exists
	Recorded  *Record `json:"recorded,omitempty"` // what vmdock did, if anything
}

// ParseIP checks an alias address.
func ParseIP(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() {
		return "", fmt.Errorf("bad loopback alias IP %q: want an IPv4 unicast address outside 127.0.0.0/8, such as %s", s, DefaultIP)
	}
	return a.String(), nil
}

// Add puts ip on the loopback (unless it is there already) and, with
// persist, installs the boot-time file. Each completed step is recorded
// before the next starts, so a failure halfway can still be undone.
func (m *Manager) Add(ctx context.Context, ip string, persist bool) error {
	ip, err := ParseIP(ip)
	if err != nil {
		return err
	}
	st, err := m.load()
	if err != nil {
		return err
	}
	rec := st.find(ip)
	if rec == nil {
		st.Aliases = append(st.Aliases, Record{IP: ip})
		rec = &st.Aliases[len(st.Aliases)-1]
	}
	present, err := m.present(ctx, ip)
	if err != nil {
		return err
	}
	if !present {
		if _, err := m.Runner.Run(ctx, nil, addArgv(ip)...); err != nil {
			return fmt.Errorf("add loopback alias %s: %w", ip, err)
		}
		rec.Added = true
	}
	if err := m.save(st); err != nil {
		return err
	}
	if !persist || rec.PersistFile != "" {
		return nil
	}
	for _, r := range st.Aliases {
		if r.IP != ip && r.PersistFile != "" {
			return fmt.Errorf("persist loopback alias %s: %s is already persisted in %s; remove it first", ip, r.IP, r.PersistFile)
		}
	}
	file := m.path(persistPath)
	if err := m.writeFile(ctx, file, persistContent(ip)); err != nil {
		return fmt.Errorf("persist loopback alias %s: %w", ip, err)
	}
	rec.PersistFile = persistPath
	if err := m.save(st); err != nil {
		return err
	}
	for _, argv := range enableArgvs(file) {
		if _, err := m.Runner.Run(ctx, nil, argv...); err != nil {
			return fmt.Errorf("persist loopback alias %s: %w", ip, err)
		}
	}
	return nil
}

// Remove undoes what Add recorded for ip: the boot-time file if Add
// installed it, the alias if Add created it.
func (m *Manager) Remove(ctx context.Context, ip string) error {
	ip, err := ParseIP(ip)
	if err != nil {
		return err
	}
	st, err := m.load()
	if err != nil {
		return err
	}
	rec := st.find(ip)
	if rec == nil {
		return fmt.Errorf("remove loopback alias %s: vmdock did not add it (nothing recorded in %s)", ip, m.StatePath)
	}
	if rec.PersistFile != "" {
		file := m.path(rec.PersistFile)
		for _, argv := range disableArgvs(file) {
			if _, err := m.Runner.Run(ctx, nil, argv...); err != nil {
				return fmt.Errorf("remove persisted loopback alias %s: %w", ip, err)
			}
		}
		if err := m.removeFile(ctx, file); err != nil {
			return fmt.Errorf("remove persisted loopback alias %s: %w", ip, err)
		}
		for _, argv := range afterRemoveArgvs() {
			if _, err := m.Runner.Run(ctx, nil, argv...); err != nil {
				return fmt.Errorf("remove persisted loopback alias %s: %w", ip, err)
			}
		}
		rec.PersistFile = ""
		if err := m.save(st); err != nil {
			return err
		}
	}
	if rec.Added {
		present, err := m.present(ctx, ip)
		if err != nil {
			return err
		}
		if present {
			if _, err := m.Runner.Run(ctx, nil, delArgv(ip)...); err != nil {
				return fmt.Errorf("remove loopback alias %s: %w", ip, err)
			}
		}
	}
	st.drop(ip)
	return m.save(st)
}

// Status reports whether ip is on the loopback and what vmdock recorded.
func (m *Manager) Status(ctx context.Context, ip string) (Status, error) {
	ip, err := ParseIP(ip)
	if err != nil {
		return Status{}, err
	}
	s := Status{IP: ip}
	if s.Present, err = m.present(ctx, ip); err != nil {
		return s, err
	}
	if _, err := os.Stat(m.path(persistPath)); err == nil {
		s.Persisted = true
	}
	st, err := m.load()
	if err != nil {
		return s, err
	}
	if r := st.find(ip); r != nil {
		cp := *r
		s.Recorded = &cp
	}
	return s, nil
}

func (m *Manager) present(ctx context.Context, ip string) (bool, error) {
	q := m.Query
	if q == nil {
		q = m.Runner
	}
	out, err := q.Run(ctx, nil, showArgv()...)
	if err != nil {
		return false, fmt.Errorf("list loopback addresses: %w", err)
	}
	return hasAlias(string(out), ip), nil
}

func (m *Manager) path(p string) string {
	if m.Root == "" {
		return p
	}
	return filepath.Join(m.Root, p)
}

func (m *Manager) writeFile(ctx context.Context, path string, data []byte) error {
	if m.Privileged {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		return atomicfile.WriteFile(path, data, 0o644)
	}
	if _, err := m.Runner.Run(ctx, data, "tee", path); err != nil {
		return err
	}
	_, err := m.Runner.Run(ctx, nil, "chmod", "0644", path)
	return err
}

func (m *Manager) removeFile(ctx context.Context, path string) error {
	if m.Privileged {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	_, err := m.Runner.Run(ctx, nil, "rm", "-f", path)
	return err
}

func (m *Manager) load() (*state, error) {
	st := &state{}
	b, err := os.ReadFile(m.StatePath)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read loopback alias state: %w", err)
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("read loopback alias state %s: %w", m.StatePath, err)
	}
	return st, nil
}

func (m *Manager) save(st *state) error {
	if len(st.Aliases) == 0 {
		if err := os.Remove(m.StatePath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("clear loopback alias state: %w", err)
		}
		return nil
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode loopback alias state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(m.StatePath), 0o700); err != nil {
		return fmt.Errorf("save loopback alias state: %w", err)
	}
	if err := atomicfile.WriteFile(m.StatePath, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save loopback alias state: %w", err)
	}
	return nil
}

func (st *state) find(ip string) *Record {
	for i := range st.Aliases {
		if st.Aliases[i].IP == ip {
			return &st.Aliases[i]
		}
	}
	return nil
}

func (st *state) drop(ip string) {
	out := st.Aliases[:0]
	for _, r := range st.Aliases {
		if r.IP != ip {
			out = append(out, r)
		}
	}
	st.Aliases = out
}

// StatePath is where the state file lives in the vmdock home folder.
func StatePath(home string) string { return filepath.Join(home, "loopback-alias.json") }

// NewManager is the Manager for this machine: state under home (the vmdock
// home folder), commands through sudo when not root, each command line
// echoed to echo first.
func NewManager(home string, echo io.Writer) *Manager {
	root := os.Geteuid() == 0
	return &Manager{
		Runner:     ExecRunner{Sudo: !root, Echo: echo},
		Query:      ExecRunner{},
		StatePath:  StatePath(home),
		Privileged: root,
	}
}
