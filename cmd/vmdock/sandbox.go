package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vmdock/vmdock/network/egress"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

func newSandboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Sandboxes for coding agents: a VM with only its workspace and allowed hosts",
		Long: "A sandbox is an instance with its own VM and Docker engine whose only folder from the host is its workspace " +
			"(copied in, host to guest only), with no SSH agent, host CAs or host access, and whose network reaches only the allowed hosts. See docs/sandbox.md.",
	}
	cmd.AddCommand(newSandboxCreateCmd(g), newSandboxLogCmd(g))
	return cmd
}

type sandboxCreateFlags struct {
	workspace string
	allow     []string
	noStart   bool
}

func newSandboxCreateCmd(g *globals) *cobra.Command {
	var f sandboxCreateFlags
	cmd := &cobra.Command{
		Use:   "create NAME --workspace DIR [--allow HOST[:PORT]]...",
		Short: "Create (and start) a sandbox instance for the workspace",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSandboxCreate(cmd.Context(), g, args[0], f, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.workspace, "workspace", "", "the host folder the agent works on (required)")
	cmd.Flags().StringArrayVar(&f.allow, "allow", nil, "a host the sandbox may reach: "+egress.RuleGrammar+" (repeatable)")
	cmd.Flags().BoolVar(&f.noStart, "no-start", false, "write the sandbox's config only; `vmdock start -p NAME` boots it")
	return cmd
}

// runSandboxCreate checks everything before it writes anything: a bad
// workspace or allow entry leaves no instance behind.
func runSandboxCreate(ctx context.Context, g *globals, name string, f sandboxCreateFlags, in io.Reader, out, errOut io.Writer) error {
	home, err := store.Home()
	if err != nil {
		return err
	}
	inst, err := store.Open(home, name)
	if err != nil {
		return err
	}
	if inst.Exists() {
		return fmt.Errorf("profile %q exists; accepted: a new name (or `vmdock delete -p %s` first)", name, name)
	}
	if f.workspace == "" {
		return errors.New("--workspace is required; accepted: an existing project folder")
	}
	ws, err := config.CheckWorkspace(f.workspace)
	if err != nil {
		return err
	}
	for _, a := range f.allow {
		if _, err := egress.ParseRule(a); err != nil {
			return fmt.Errorf("--allow: %w", err)
		}
	}
	cfg, err := baseConfig(home, g.host)
	if err != nil {
		return err
	}
	cfg.Sandbox = &config.SandboxConfig{Workspace: ws, Allow: f.allow}
	cfg.Activate = false // the user's docker context stays theirs
	cfg.FillDefaults(g.host)
	cfg.Normalize()
	if err := cfg.ValidateOn(g.host); err != nil {
		return err
	}
	if err := inst.Create(); err != nil {
		return err
	}
	if err := cfg.Save(inst.ConfigPath()); err != nil {
		return err
	}
	fmt.Fprintf(out, "sandbox %q created for %s (allowed: %d hosts)\n", name, ws, len(f.allow))
	if f.noStart {
		return nil
	}
	sg := *g
	sg.profile = name
	return runStart(ctx, &sg, pflag.NewFlagSet("start", pflag.ContinueOnError), &startFlags{}, in, out, errOut)
}

func newSandboxLogCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "log NAME",
		Short: "Show what the sandbox tried to reach and was refused",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			inst, err := sandboxInstance(g, args[0])
			if err != nil {
				return err
			}
			b, err := os.ReadFile(inst.EgressLogPath())
			if errors.Is(err, os.ErrNotExist) {
				fmt.Fprintln(cmd.OutOrStdout(), "nothing refused yet")
				return nil
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", filepath.Base(inst.EgressLogPath()), err)
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
}

// sandboxInstance is the existing sandbox name.
func sandboxInstance(g *globals, name string) (*store.Instance, error) {
	sg := *g
	sg.profile = name
	inst, cfg, err := sg.existingConfig()
	if err != nil {
		return nil, err
	}
	if !cfg.IsSandbox() {
		return nil, fmt.Errorf("profile %q is not a sandbox; accepted: a profile made with `vmdock sandbox create`", name)
	}
	return inst, nil
}
