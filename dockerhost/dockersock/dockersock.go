// Package dockersock makes the default docker socket path
// (/var/run/docker.sock) a symlink to a vmdock instance's docker socket,
// for tools that ignore docker contexts and DOCKER_HOST, and undoes it.
// It never replaces what vmdock did not create: a symlink into the vmdock
// home's instance sockets is vmdock's, anything else is left alone.
package dockersock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultPath is where docker clients look when nothing else is set.
const DefaultPath = "/var/run/docker.sock"

// PathEnv overrides DefaultPath, so tests (and users who want the link
// elsewhere) never touch the real one.
const PathEnv = "VMDOCK_DOCKER_SOCK_PATH"

// socketName is an instance's docker socket file in its folder under
// the vmdock home (vm/store's DockerSocketPath).
const socketName = "docker.sock"

// State is what is at the link path.
type State string

const (
	// Absent: nothing there.
	Absent State = "absent"
	// Live: vmdock's link, and its instance's socket answers.
	Live State = "live"
	// Dangling: vmdock's link to an instance socket that is not there
	// (the instance is stopped or deleted).
	Dangling State = "dangling"
	// NotAnswering: vmdock's link to a socket file nobody accepts on
	// (a host agent that died without cleaning up).
	NotAnswering State = "not answering"
	// Foreign: something vmdock did not create.
	Foreign State = "foreign"
)

// Status is what the link path holds now.
type Status struct {
	Path  string `json:"path"`
	State State  `json:"state"`
	// Target is the symlink's target (any symlink, ours or not).
	Target string `json:"target,omitempty"`
	// Profile is the vmdock profile whose socket the link points at.
	Profile string `json:"profile,omitempty"`
	// What describes a Foreign path, e.g. "a socket vmdock did not create".
	What string `json:"what,omitempty"`
	// ProfileGone: a Dangling link's profile was deleted, so no start
	// will bring it back.
	ProfileGone bool `json:"profileGone,omitempty"`
}

// Runner runs one command that changes the link (ln, rm), with whatever
// privileges that takes.
type Runner interface {
	Run(ctx context.Context, argv ...string) error
}

// Linker manages the link at Path.
type Linker struct {
	Path string
	// Home is the vmdock home (absolute): a symlink to
	// Home/<profile>/docker.sock is vmdock's.
	Home string
	Run  Runner
}

// instanceSocket reports whether target is an instance's docker socket
// under l.Home, and the instance's profile name.
func (l *Linker) instanceSocket(target string) (profile string, ok bool) {
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(l.Path), target)
	}
	target = filepath.Clean(target)
	dir := filepath.Dir(target)
	if filepath.Base(target) != socketName || filepath.Dir(dir) != filepath.Clean(l.Home) {
		return "", false
	}
	return filepath.Base(dir), true
}

// Status reports what is at the link path. Only an unreadable path is an
// error.
func (l *Linker) Status(ctx context.Context) (Status, error) {
	st := Status{Path: l.Path}
	fi, err := os.Lstat(l.Path)
	if errors.Is(err, fs.ErrNotExist) {
		st.State = Absent
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("inspect %s: %w", l.Path, err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		st.State, st.What = Foreign, describe(fi.Mode())
		return st, nil
	}
	target, err := os.Readlink(l.Path)
	if err != nil {
		return st, fmt.Errorf("read link %s: %w", l.Path, err)
	}
	st.Target = target
	profile, ok := l.instanceSocket(target)
	if !ok {
		st.State, st.What = Foreign, fmt.Sprintf("a symlink to %s, which is not a socket of a vmdock instance in %s", target, l.Home)
		return st, nil
	}
	st.Profile = profile
	st.State = answering(ctx, l.Path)
	if st.State == Dangling {
		if _, err := os.Stat(filepath.Join(l.Home, profile)); errors.Is(err, fs.ErrNotExist) {
			st.ProfileGone = true
		}
	}
	return st, nil
}

// answering dials the socket through the link: a stopped instance has
// removed its socket file, a dead host agent may have left it behind.
func answering(ctx context.Context, path string) State {
	if _, err := os.Stat(path); err != nil {
		return Dangling
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return NotAnswering
	}
	c.Close()
	return Live
}

func describe(m fs.FileMode) string {
	switch {
	case m&fs.ModeSocket != 0:
		return "a socket vmdock did not create (another docker engine's?)"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	default:
		return "a file of type " + m.Type().String()
	}
}

// refusal is the one-line error for a path vmdock will not touch.
func refusal(verb string, st Status) error {
	return fmt.Errorf("refusing to %s %s: it is %s; move it away yourself, or set %s to use another path", verb, st.Path, st.What, PathEnv)
}

// Link points the link path at socket, profile's docker socket (which
// need not exist yet: the link dangles until the instance runs). An
// absent path or a vmdock link is (re)made; anything else is refused.
// It returns the status before, so the caller can say what changed.
func (l *Linker) Link(ctx context.Context, socket string) (Status, error) {
	socket = filepath.Clean(socket)
	if _, ok := l.instanceSocket(socket); !ok || !filepath.IsAbs(socket) {
		return Status{}, fmt.Errorf("link %s: %s is not an instance's docker socket in %s", l.Path, socket, l.Home)
	}
	before, err := l.Status(ctx)
	if err != nil {
		return before, err
	}
	switch {
	case before.State == Foreign:
		return before, refusal("replace", before)
	case before.State == Absent:
		// No -f: a file that appeared since Status makes ln fail, not vanish.
		err = l.Run.Run(ctx, "ln", "-s", socket, l.Path)
	case filepath.Clean(before.Target) == socket:
		return before, nil
	default:
		// -n: the old link is replaced even when it points at a directory,
		// where plain -sf would create docker.sock inside that directory.
		err = l.Run.Run(ctx, "ln", "-sfn", socket, l.Path)
	}
	if err != nil {
		return before, fmt.Errorf("link %s to %s: %w", l.Path, socket, err)
	}
	if got, err := os.Readlink(l.Path); err != nil || got != socket {
		return before, fmt.Errorf("link %s to %s: after ln it points at %q (%v)", l.Path, socket, got, err)
	}
	return before, nil
}

// Unlink removes the link if vmdock made it (it may name any profile);
// an absent path is fine, anything else is refused. It returns the
// status before.
func (l *Linker) Unlink(ctx context.Context) (Status, error) {
	before, err := l.Status(ctx)
	if err != nil {
		return before, err
	}
	switch before.State {
	case Absent:
		return before, nil
	case Foreign:
		return before, refusal("remove", before)
	}
	if err := l.Run.Run(ctx, "rm", "--", l.Path); err != nil {
		return before, fmt.Errorf("remove %s: %w", l.Path, err)
	}
	return before, nil
}

// Describe is st as one line for people.
func Describe(st Status) string {
	switch st.State {
	case Absent:
		return st.Path + ": absent (not linked)"
	case Foreign:
		return st.Path + ": not vmdock's: " + st.What
	}
	line := fmt.Sprintf("%s -> %s (profile %s): ", st.Path, st.Target, st.Profile)
	switch st.State {
	case Live:
		return line + "live"
	case Dangling:
		if st.ProfileGone {
			return line + "dangling: the profile no longer exists; `vmdock docker-sock unlink` removes the link"
		}
		return line + "dangling: the instance is not running; `vmdock start -p " + st.Profile + "` makes it live again"
	default:
		return line + "the socket is there but does not answer; `vmdock status -p " + st.Profile + "` says why"
	}
}

// quote is argv as a shell would take it, for the printed command line.
func quote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
