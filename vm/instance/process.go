package instance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vmdock/vmdock/vm/store"
)

// procInfo is what the OS tells about a process that may be a host agent.
type procInfo struct {
	args  []string
	cwd   string    // resolved working folder; "" when the OS would not say
	start time.Time // zero when the OS would not say
}

// startSlack absorbs the coarse clocks behind a process start time (Linux
// counts from a boot time in whole seconds).
const startSlack = 2 * time.Second

// isOwnHostAgent reports whether pid is inst's host agent, so stale-pid
// cleanup never kills another profile's host agent, another VMDOCK_HOME's,
// or an unrelated process that reused the pid. It must be a `hostagent`
// command for inst's profile, run in inst's folder (vmdock start sets its
// working folder there), and started no later than it wrote pidFile. The
// reason says why not, for the log.
func isOwnHostAgent(inst *store.Instance, pid int, pidFile string) (bool, string) {
	info, err := processInfo(pid)
	if err != nil {
		return false, fmt.Sprintf("cannot inspect pid %d: %v", pid, err)
	}
	profile, ok := hostAgentProfile(info.args)
	if !ok {
		return false, fmt.Sprintf("pid %d is not a vmdock host agent: %q", pid, strings.Join(info.args, " "))
	}
	if profile != inst.Name {
		return false, fmt.Sprintf("pid %d is the host agent of profile %q", pid, profile)
	}
	dir, err := filepath.EvalSymlinks(inst.Dir)
	if err != nil {
		dir = inst.Dir
	}
	if info.cwd == "" {
		return false, fmt.Sprintf("cannot tell pid %d's folder", pid)
	}
	if info.cwd != dir {
		return false, fmt.Sprintf("pid %d runs in %s, not in %s", pid, info.cwd, dir)
	}
	fi, err := os.Stat(pidFile)
	if err == nil && !info.start.IsZero() && info.start.After(fi.ModTime().Add(startSlack)) {
		return false, fmt.Sprintf("pid %d started at %s, after %s was written: the pid was reused", pid, info.start.Format(time.RFC3339), pidFile)
	}
	return true, ""
}

// hostAgentProfile finds the profile in a `vmdock hostagent` command line:
// `hostagent --profile NAME` as vmdock start runs it, or the -p, --profile=
// and positional forms a user may type.
func hostAgentProfile(args []string) (string, bool) {
	i := 0
	for i < len(args) && args[i] != "hostagent" {
		i++
	}
	if i == len(args) {
		return "", false
	}
	rest := args[i+1:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		switch {
		case (a == "--profile" || a == "-p") && j+1 < len(rest):
			return rest[j+1], true
		case strings.HasPrefix(a, "--profile="):
			return strings.TrimPrefix(a, "--profile="), true
		case strings.HasPrefix(a, "-p") && len(a) > 2 && !strings.HasPrefix(a, "--"):
			return strings.TrimPrefix(a[2:], "="), true
		case !strings.HasPrefix(a, "-"):
			return a, true
		}
	}
	return "", false
}
