package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/internal/fsutil"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/remote"
)

func newStopCmd(g *globals) *cobra.Command {
	var force, noSave bool
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop the instance (the previous docker context comes back)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inst, err := g.existing()
			if err != nil {
				return err
			}
			lock, err := instance.Lock(cmd.Context(), inst)
			if err != nil {
				return err
			}
			defer lock.Unlock()
			if err := stopVM(cmd.Context(), inst, instance.StopOptions{Force: force, NoSave: noSave, Progress: cmd.OutOrStdout()}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "profile %q stopped\n", inst.Name)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "kill the VM without a graceful power-off (never saves; a guest agent that answers within 3 s flushes the guest's disks first)")
	cmd.Flags().BoolVar(&noSave, "no-save", false, "power the guest off instead of saving it for a fast start (resume: true)")
	return cmd
}

func newRestartCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "restart",
		Short: "Stop and start the instance with its saved config",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inst, cfg, err := g.existingConfig()
			if err != nil {
				return err
			}
			cfg.Normalize()
			if err := cfg.ValidateOn(g.host); err != nil {
				return err
			}
			if err := instance.CheckSocketPaths(inst, cfg); err != nil {
				return err
			}
			lock, err := instance.Lock(cmd.Context(), inst)
			if err != nil {
				return err
			}
			defer lock.Unlock()
			if err := stopVM(cmd.Context(), inst, instance.StopOptions{Progress: cmd.OutOrStdout()}); err != nil {
				return err
			}
			return startVM(cmd.Context(), inst, cfg, instance.StartOptions{Progress: cmd.OutOrStdout()})
		},
	}
}

func newDeleteCmd(g *globals) *cobra.Command {
	var opts instance.DeleteOptions
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete the instance (its data disk stays unless --data)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inst, err := g.existing()
			if err != nil {
				// A plain delete leaves the data disk behind on purpose;
				// `delete --data` must still be able to remove it.
				leftover, lerr := g.instance()
				if lerr != nil || !opts.Data || !fsutil.Exists(leftover.DataDiskPath()) {
					return err
				}
				inst = leftover
			}
			if err := instance.CheckDelete(inst); err != nil {
				return err
			}
			lock, err := instance.Lock(cmd.Context(), inst)
			if err != nil {
				return err
			}
			defer lock.Unlock()
			opts.Progress = cmd.OutOrStdout()
			cfg, cfgErr := inst.LoadConfig(g.host) // read before the folder goes
			syncKey, _ := inst.RecordedRemoteKey()
			if err := deleteVM(cmd.Context(), inst, opts); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cfgErr == nil && cfg.IsRemote() {
				removeRemoteHelpers(cmd.Context(), cfg, syncKey, out)
			}
			fmt.Fprintf(out, "profile %q deleted\n", inst.Name)
			if !opts.Data && fsutil.Exists(inst.DataDiskPath()) {
				fmt.Fprintf(out, "its data disk stays at %s for the next start; `vmdock delete --data -p %s` removes it\n", inst.DataDiskPath(), inst.Name)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.Data, "data", false, "also delete the data disk (docker images, containers, volumes)")
	cmd.Flags().BoolVarP(&opts.Force, "force", "f", false, "stop a running instance first")
	return cmd
}

// removeRemoteHelpers takes vmdock's helper and the instance's sync state
// (syncKey names it) off a deleted remote instance's server, never its
// images, volumes or the folders synced there; an unreachable server is
// a note, not a failed delete.
func removeRemoteHelpers(ctx context.Context, cfg config.Config, syncKey string, out io.Writer) {
	target, err := remote.ParseURL(cfg.Remote.URL)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err = remote.Server{Target: target, Socket: cfg.Remote.Socket}.RemoveHelpers(ctx, syncKey)
	}
	if err != nil {
		fmt.Fprintf(out, "vmdock's helper stays on the server (%v); remove ~/.cache/vmdock there by hand\n", err)
		return
	}
	fmt.Fprintf(out, "vmdock's helper was removed from %s; its images, containers, volumes and synced folders stay\n", target)
}

func newHostAgentCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "hostagent [profile]",
		Short:  "Run an instance's host agent (started by `vmdock start`)",
		Hidden: true,
		Args:   cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				g.profile = args[0]
			}
			inst, err := g.existing()
			if err != nil {
				return err
			}
			return runHostAgent(cmd.Context(), inst, g.host)
		},
	}
}
