package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/network/egress"
	"github.com/vmdock/vmdock/vm/driver"
)

// SandboxConfig makes an instance a sandbox for a coding agent: its one
// folder from the host is the workspace, copied in (host to guest only)
// at the same path, and its network reaches only the allowed hosts.
type SandboxConfig struct {
	// Workspace is the host folder the agent works on; ~ expands.
	Workspace string `yaml:"workspace" json:"workspace"`
	// Allow lists where the sandbox may connect (egress.RuleGrammar):
	// everything else is refused, and its DNS answers only these names.
	Allow []string `yaml:"allow,omitempty" json:"allow,omitempty"`
	// Secrets are credentials added on the way out (their hosts are
	// allowed on 443 too).
	Secrets []SandboxSecret `yaml:"secrets,omitempty" json:"secrets,omitempty"`
}

// applySandbox sets what a sandbox never leaves to the rest of the
// config, whatever the file or the flags said: the workspace as its only
// folder (a sync mount), no SSH agent, no host CAs, the host agent's
// network stack (where egress is enforced) in user mode.
func (c *Config) applySandbox() {
	if c.Sandbox == nil {
		return
	}
	home, _ := os.UserHomeDir()
	ws := mounts.Resolve([]Mount{{Location: c.Sandbox.Workspace}}, home)[0].Location
	c.Mounts = []Mount{{Location: ws, GuestPath: ws, Writable: true, Mode: mounts.ModeSync}}
	off := false
	c.SSHAgent = &off
	c.HostCACerts = false
	c.CACerts = nil
	c.Network.Stack = driver.NetStackGvisor
	c.Network.Mode = driver.NetworkUser
	// Only the stack's DNS answers a sandbox (and decides what it may
	// reach): another resolver would be an address it may not.
	c.Network.DNS = nil
}

// IsSandbox says whether c is a sandbox's config.
func (c Config) IsSandbox() bool { return c.Sandbox != nil }

// SyncMounts are c's sync mounts for the sync engine: a sandbox's
// workspace goes host to guest only, so the agent's edits stay in the VM.
func (c Config) SyncMounts() []mounts.Sync {
	syncs := mounts.Syncs(c.Mounts)
	for i := range syncs {
		syncs[i].HostToGuest = c.IsSandbox()
	}
	return syncs
}

// EgressPolicy is the sandbox's allowlist, refusals appended to log; nil
// when c is no sandbox.
func (c Config) EgressPolicy(log io.Writer) (*egress.Policy, error) {
	if !c.IsSandbox() {
		return nil, nil
	}
	allow := c.Sandbox.Allow
	for _, s := range c.Sandbox.Secrets {
		allow = append(slices.Clip(allow), s.Host+":443")
	}
	return egress.New(allow, log)
}

func (c Config) validateSandbox() []error {
	if c.Sandbox == nil {
		return nil
	}
	var errs []error
	if _, err := CheckWorkspace(c.Sandbox.Workspace); err != nil {
		errs = append(errs, err)
	}
	for _, a := range c.Sandbox.Allow {
		if _, err := egress.ParseRule(a); err != nil {
			errs = append(errs, fmt.Errorf("sandbox.allow: %w", err))
		}
	}
	return append(errs, c.validateSecrets()...)
}

// CheckWorkspace checks a sandbox's workspace and returns it absolute,
// symlinks resolved: an existing folder that is not /, the home folder or
// a folder holding it (the agent would get every secret in it).
func CheckWorkspace(dir string) (string, error) {
	const accepted = "accepted: an existing project folder inside or outside the home folder, not / nor the home folder itself nor one holding it"
	if strings.TrimSpace(dir) == "" {
		return "", fmt.Errorf("sandbox.workspace: empty; %s", accepted)
	}
	home, _ := os.UserHomeDir()
	abs := mounts.Resolve([]Mount{{Location: dir}}, home)[0].Location
	abs, err := filepath.Abs(abs)
	if err != nil {
		return "", fmt.Errorf("sandbox.workspace %q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("sandbox.workspace %q does not exist; %s", dir, accepted)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("sandbox.workspace %q is not a folder; %s", dir, accepted)
	}
	if real == "/" {
		return "", fmt.Errorf("sandbox.workspace %q is /; %s", dir, accepted)
	}
	if home != "" {
		if realHome, err := filepath.EvalSymlinks(home); err == nil && (realHome == real || strings.HasPrefix(realHome, real+string(filepath.Separator))) {
			return "", fmt.Errorf("sandbox.workspace %q is the home folder or holds it; %s", dir, accepted)
		}
	}
	return real, nil
}
