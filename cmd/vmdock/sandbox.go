package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vmdock/vmdock/internal/review"
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
	cmd.AddCommand(newSandboxCreateCmd(g), newSandboxLogCmd(g), newSandboxDiffCmd(g), newSandboxAcceptCmd(g), newSandboxRejectCmd(g))
	return cmd
}

type sandboxCreateFlags struct {
	workspace string
	allow     []string
	secrets   []string
	noStart   bool
}

func newSandboxCreateCmd(g *globals) *cobra.Command {
	var f sandboxCreateFlags
	cmd := &cobra.Command{
		Use:   "create NAME --workspace DIR [--allow HOST[:PORT]]... [--secret NAME=ENV@HOST|NAME=keychain:SERVICE@HOST]...",
		Short: "Create (and start) a sandbox instance for the workspace",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSandboxCreate(cmd.Context(), g, args[0], f, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.workspace, "workspace", "", "the host folder the agent works on (required)")
	cmd.Flags().StringArrayVar(&f.allow, "allow", nil, "a host the sandbox may reach: "+egress.RuleGrammar+" (repeatable)")
	cmd.Flags().StringArrayVar(&f.secrets, "secret", nil, "a credential added to HTTPS requests to HOST on the way out, read on the host at start: "+config.SecretFlagGrammar+" (repeatable)")
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
	var secrets []config.SandboxSecret
	for _, s := range f.secrets {
		sec, err := config.ParseSecretFlag(s)
		if err != nil {
			return err
		}
		secrets = append(secrets, sec)
	}
	cfg, err := baseConfig(home, g.host)
	if err != nil {
		return err
	}
	cfg.Sandbox = &config.SandboxConfig{Workspace: ws, Allow: f.allow, Secrets: secrets}
	if errs := cfg.CheckSecrets(config.HostSecrets); len(errs) > 0 {
		return errors.Join(errs...)
	}
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
	if err := review.RecordBase(ws, inst.SandboxBasePath()); err != nil {
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
	inst, _, err := sandboxInstanceConfig(g, name)
	return inst, err
}

// sandboxInstanceConfig is the existing sandbox name and its workspace.
func sandboxInstanceConfig(g *globals, name string) (*store.Instance, string, error) {
	sg := *g
	sg.profile = name
	inst, cfg, err := sg.existingConfig()
	if err != nil {
		return nil, "", err
	}
	if !cfg.IsSandbox() {
		return nil, "", fmt.Errorf("profile %q is not a sandbox; accepted: a profile made with `vmdock sandbox create`", name)
	}
	return inst, cfg.Mounts[0].Location, nil
}

// sandboxWorkspace is the review of sandbox name's workspace, read
// through the guest agent.
func sandboxWorkspace(ctx context.Context, g *globals, name string) (*review.Review, error) {
	inst, ws, err := sandboxInstanceConfig(g, name)
	if err != nil {
		return nil, err
	}
	w := review.Workspace{Host: ws, GuestPath: ws, BasePath: inst.SandboxBasePath(), Guest: guestRunner(inst)}
	return w.Read(ctx)
}

// guestRunner runs a command in inst's guest, its errors with what it
// wrote to stderr.
func guestRunner(inst *store.Instance) review.Guest {
	return func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
		if stdin == nil {
			stdin = strings.NewReader("")
		}
		if stdout == nil {
			stdout = io.Discard
		}
		var stderr bytes.Buffer
		code, err := execVM(ctx, inst, argv, stdin, stdout, &stderr)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("%s exited with %d: %s", argv[0], code, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
}

func newSandboxDiffCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "diff NAME",
		Short: "Show the agent's changes to the workspace as a unified diff",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := sandboxWorkspace(cmd.Context(), g, args[0])
			if err != nil {
				return err
			}
			return r.WriteDiff(cmd.OutOrStdout())
		},
	}
}

func newSandboxAcceptCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "accept NAME [PATH...]",
		Short: "Write the agent's changes (all, or under PATHs) into the host's workspace",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := sandboxWorkspace(cmd.Context(), g, args[0])
			if err != nil {
				return err
			}
			accepted, refused, err := r.Accept(args[1:])
			for _, p := range accepted {
				fmt.Fprintf(cmd.OutOrStdout(), "accepted %s\n", p)
			}
			if err != nil {
				return err
			}
			if len(refused) > 0 {
				lines := make([]string, 0, len(refused))
				for _, x := range refused {
					lines = append(lines, fmt.Sprintf("  %s: %s", x.Path, x.Why))
				}
				return fmt.Errorf("%d changes not accepted (`vmdock sandbox reject %s PATH` drops them, or edit the host's file):\n%s", len(refused), args[0], strings.Join(lines, "\n"))
			}
			return nil
		},
	}
}

func newSandboxRejectCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reject NAME [PATH...]",
		Short: "Drop the agent's changes (all, or under PATHs): the guest gets the host's version back",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := sandboxWorkspace(cmd.Context(), g, args[0])
			if err != nil {
				return err
			}
			rejected, err := r.Reject(cmd.Context(), args[1:])
			for _, p := range rejected {
				fmt.Fprintf(cmd.OutOrStdout(), "rejected %s\n", p)
			}
			return err
		},
	}
}
