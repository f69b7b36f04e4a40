package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/dockerhost/dockerctx"
	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

func newNerdctlCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nerdctl [-- args...]",
		Short: "Run nerdctl in the guest of a containerd instance, in the same folder",
		Long: "Runs nerdctl in the guest with your terminal, in the folder you are in (shared folders\n" +
			"have the same path in the guest), and exits with its status. Everything after the first\n" +
			"argument goes to nerdctl; put `--` first when that starts with a flag.",
		Example: `  vmdock nerdctl ps -a
  vmdock nerdctl -- run --rm -v "$PWD":/app -w /app alpine ls
  vmdock nerdctl install`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			inst, cfg, err := containerdInstance(g)
			if err != nil {
				return err
			}
			wd, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("working folder: %w", err)
			}
			dir, shared := guestFolder(cfg, wd)
			if !shared {
				fmt.Fprintf(cmd.ErrOrStderr(), "vmdock: %s is not shared with the guest; nerdctl runs in /\n", wd)
			}
			code, err := execVMIn(cmd.Context(), inst, dir, append([]string{"nerdctl"}, args...), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
	// Flags after the first argument are nerdctl's.
	cmd.Flags().SetInterspersed(false)
	cmd.AddCommand(newNerdctlInstallCmd(g))
	return cmd
}

// containerdInstance is the running instance of a `vmdock nerdctl`
// command, which must use the containerd runtime.
func containerdInstance(g *globals) (*store.Instance, config.Config, error) {
	inst, cfg, err := g.existingConfig()
	if err != nil {
		return nil, cfg, err
	}
	if cfg.Runtime != config.RuntimeContainerd {
		return nil, cfg, fmt.Errorf("profile %q runs the %s runtime: use `docker` (context %q) instead of nerdctl, or create a containerd instance with `vmdock start -p NAME --runtime containerd`", inst.Name, cfg.Runtime, dockerctx.Name(inst.Name))
	}
	return inst, cfg, nil
}

// guestFolder is where host folder wd is in the guest: the same place
// under a share or sync mount (at its guest path), else "/" and false.
func guestFolder(cfg config.Config, wd string) (string, bool) {
	type place struct{ host, guest string }
	var places []place
	for _, sh := range mounts.Shares(cfg.Mounts, cfg.MountType) {
		places = append(places, place{sh.HostPath, sh.GuestPath})
	}
	for _, sy := range mounts.Syncs(cfg.Mounts) {
		places = append(places, place{sy.HostPath, sy.GuestPath})
	}
	// The deepest mount wins: a sync mount inside the shared home is
	// bound over the share at its own path.
	best, bestLen := "", -1
	for _, p := range places {
		rel, err := filepath.Rel(p.host, wd)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		if len(p.host) > bestLen {
			best, bestLen = filepath.ToSlash(filepath.Join(p.guest, rel)), len(p.host)
		}
	}
	if bestLen < 0 {
		return "/", false
	}
	return best, true
}

// nerdctlScriptMark is in every script `vmdock nerdctl install` writes;
// it will not replace a file without it.
const nerdctlScriptMark = "written by `vmdock nerdctl install`"

func newNerdctlInstallCmd(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "install [--path DIR]",
		Short: "Write a host `nerdctl` script that runs `vmdock nerdctl` for this profile",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inst, _, err := containerdInstance(g)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find the vmdock binary: %w", err)
			}
			if r, err := filepath.EvalSymlinks(exe); err == nil {
				exe = r
			}
			path, err := installNerdctlScript(dir, exe, inst.Name)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: `nerdctl ...` now runs `vmdock nerdctl -p %s -- ...`\n", path, inst.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "path", "/usr/local/bin", "folder to write the nerdctl script into")
	return cmd
}

// installNerdctlScript writes dir/nerdctl. It refuses to replace a file
// it did not write (a real nerdctl, someone's own script).
func installNerdctlScript(dir, vmdockPath, profile string) (string, error) {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("--path %q: not a folder; accepted: an existing folder, e.g. /usr/local/bin or ~/bin", dir)
	}
	path := filepath.Join(dir, "nerdctl")
	if old, err := os.ReadFile(path); err == nil {
		if !bytes.Contains(old, []byte(nerdctlScriptMark)) {
			return "", fmt.Errorf("%s exists and vmdock did not write it; not replacing it (remove it yourself, or pick another --path)", path)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	script := fmt.Sprintf("#!/bin/sh\n# nerdctl in vmdock profile %q, %s; it is replaced by the next install.\nexec %s nerdctl -p %s -- \"$@\"\n",
		profile, nerdctlScriptMark, shellQuote(vmdockPath), shellQuote(profile))
	if err := atomicfile.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", err
	}
	return path, nil
}
