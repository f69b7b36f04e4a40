package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/hostagent"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/layout"
	"github.com/vmdock/vmdock/vm/store"
)

// ProfileEnv sets the default of -p/--profile.
const ProfileEnv = "VMDOCK_PROFILE"

// The VM lifecycle, as variables so CLI tests run every command without
// booting anything.
var (
	startVM      = instance.Start
	stopVM       = instance.Stop
	deleteVM     = instance.Delete
	execVM       = instance.Exec
	execVMIn     = instance.ExecIn
	runHostAgent = func(ctx context.Context, inst *store.Instance, h config.Host) error {
		return hostagent.Run(ctx, inst, hostagent.Options{Host: h, Routes: benchRoutes})
	}
)

// globals are the flags every command shares, and the host they run on.
type globals struct {
	profile string
	debug   bool
	host    config.Host
}

// instance resolves the home folder and the profile's instance; it creates
// nothing. A folder a newer vmdock made is refused here, before a command
// reads a config it may not understand.
func (g *globals) instance() (*store.Instance, error) {
	home, err := store.Home()
	if err != nil {
		return nil, err
	}
	inst, err := store.Open(home, g.profile)
	if err != nil {
		return nil, err
	}
	if err := layout.Check(inst, Version); err != nil {
		return nil, err
	}
	return inst, nil
}

// existing is instance() for commands that need a created instance.
// existingConfig is an existing profile and its config as a start would
// read it.
func (g *globals) existingConfig() (*store.Instance, config.Config, error) {
	inst, err := g.existing()
	if err != nil {
		return nil, config.Config{}, err
	}
	cfg, err := inst.LoadConfig(g.host)
	if err != nil {
		return nil, cfg, err
	}
	return inst, cfg, nil
}

func (g *globals) existing() (*store.Instance, error) {
	inst, err := g.instance()
	if err != nil {
		return nil, err
	}
	if !inst.Exists() {
		return nil, fmt.Errorf("profile %q does not exist; create it with `vmdock start -p %s`", inst.Name, inst.Name)
	}
	return inst, nil
}

// newRootCmd builds the command tree for host h, which main detects once.
func newRootCmd(h config.Host) *cobra.Command {
	g := &globals{host: h}
	root := &cobra.Command{
		Use:           "vmdock",
		Short:         "A Docker engine in a lightweight Linux VM",
		Long:          "vmdock runs Docker inside a Linux VM (QEMU or Apple Virtualization.framework), shares your folders at the same paths and forwards the containers' ports to 127.0.0.1.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			level := slog.LevelInfo
			if g.debug {
				level = slog.LevelDebug
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})))
		},
	}
	profile := os.Getenv(ProfileEnv)
	if profile == "" {
		profile = "default"
	}
	root.PersistentFlags().StringVarP(&g.profile, "profile", "p", profile, "instance name (env "+ProfileEnv+")")
	root.PersistentFlags().BoolVar(&g.debug, "debug", false, "log debug messages")
	root.AddCommand(
		newStartCmd(g),
		newStopCmd(g),
		newRestartCmd(g),
		newDeleteCmd(g),
		newStatusCmd(g),
		newListCmd(g),
		newSSHCmd(g),
		newSyncCmd(g),
		newLogsCmd(g),
		newTemplateCmd(g),
		newVersionCmd(),
		newHostAgentCmd(g),
		newImageCmd(g),
		newLoopbackAliasCmd(),
		newDockerEnvCmd(g),
		newNerdctlCmd(g),
		newBenchCmd(g),
		newDoctorCmd(g),
		newSetCmd(g),
		newDockerSockCmd(g),
		newDomainsCmd(g),
		newMigrateCmd(g),
		newSandboxCmd(g),
		newMCPCmd(g),
	)
	return root
}
