package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/vmdock/vmdock/network/domains"
)

// HomeEnv overrides the vmdock home folder (default ~/.vmdock).
const HomeEnv = "VMDOCK_HOME"

var profileRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Home is $VMDOCK_HOME, or ~/.vmdock. It is not created here.
func Home() (string, error) {
	if h := os.Getenv(HomeEnv); h != "" {
		abs, err := filepath.Abs(h)
		if err != nil {
			return "", fmt.Errorf("$%s %q: %w", HomeEnv, h, err)
		}
		return abs, nil
	}
	u, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the home folder (set $%s): %w", HomeEnv, err)
	}
	return filepath.Join(u, ".vmdock"), nil
}

// ValidateProfile accepts names that are safe as a folder name and in a
// docker context name.
func ValidateProfile(name string) error {
	if !profileRE.MatchString(name) {
		return fmt.Errorf("profile %q is not accepted; accepted: 1-63 of a-z 0-9 . _ - starting with a letter or digit", name)
	}
	return nil
}

// Open names the instance of profile under home. It checks the
// name but creates nothing, so a rejected command leaves no trace.
func Open(home, profile string) (*Instance, error) {
	if err := ValidateProfile(profile); err != nil {
		return nil, err
	}
	return &Instance{Name: profile, Dir: filepath.Join(home, profile)}, nil
}

// Exists reports whether the instance has been created (it has a config).
func (i *Instance) Exists() bool {
	_, err := os.Stat(i.ConfigPath())
	return err == nil
}

// Create makes the instance folder (and home) with mode 0700: sockets and
// disks in it are nobody else's business. A new profile whose container
// domains zone another profile has is refused.
func (i *Instance) Create() error {
	if err := os.MkdirAll(filepath.Dir(i.Dir), 0o700); err != nil {
		return fmt.Errorf("create vmdock home %s: %w", filepath.Dir(i.Dir), err)
	}
	if !i.Exists() {
		if err := zoneFree(filepath.Dir(i.Dir), i.Name); err != nil {
			return err
		}
	}
	if err := os.Mkdir(i.Dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create instance folder %s: %w", i.Dir, err)
	}
	// Something of the user's in the folder's place is left as it is,
	// mode included.
	if fi, err := os.Stat(i.Dir); err != nil {
		return fmt.Errorf("create instance folder %s: %w", i.Dir, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("create instance folder %s: a file of that name is in the way (move it, or use another profile name)", i.Dir)
	}
	if err := os.Chmod(i.Dir, 0o700); err != nil {
		return fmt.Errorf("create instance folder %s: %w", i.Dir, err)
	}
	return nil
}

// zoneFree refuses profile when another profile under home has the same
// container domains zone (<profile>.vmdock.localhost with "." and "_"
// made "-"): each would answer the other's names.
func zoneFree(home, profile string) error {
	insts, err := List(home)
	if err != nil {
		return err
	}
	for _, o := range insts {
		if o.Name != profile && domains.Label(o.Name) == domains.Label(profile) {
			return fmt.Errorf("profile %q is not accepted: its domain zone %s.%s is profile %q's; accepted: a name that differs from it in more than . _ -",
				profile, domains.Label(profile), domains.Suffix, o.Name)
		}
	}
	return nil
}

// List returns every instance under home (folders with a valid
// profile name and a config), sorted by name. A missing home is no instances.
func List(home string) ([]*Instance, error) {
	entries, err := os.ReadDir(home)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list instances in %s: %w", home, err)
	}
	var out []*Instance
	for _, e := range entries {
		if !e.IsDir() || ValidateProfile(e.Name()) != nil {
			continue
		}
		inst := &Instance{Name: e.Name(), Dir: filepath.Join(home, e.Name())}
		if inst.Exists() {
			out = append(out, inst)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// ReadPID reads a pid file; an error for a missing file wraps
// os.ErrNotExist.
func ReadPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("no pid in %q", strings.TrimSpace(string(b)))
	}
	return pid, nil
}
