package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
)

// newSetCmd changes a setting of the running instance; what it sets lasts
// until the instance stops (the config's value is what a start uses).
func newSetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "set idle DURATION",
		Short: "Change the running instance's idle pause (e.g. `vmdock set idle 30s`; 0 never pauses) until it stops",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "idle" {
				return fmt.Errorf("set %q: not a setting of a running instance; accepted: idle", args[0])
			}
			d, err := config.ParseDuration(args[1])
			if err != nil {
				return fmt.Errorf("set idle: %w", err)
			}
			if err := config.CheckIdle(d); err != nil {
				return err
			}
			if _, err := runningHostAgent(cmd.Context(), g); err != nil {
				return err
			}
			inst, _ := g.existing()
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			if err := control.NewClient(inst.ControlSocketPath()).SetIdle(ctx, time.Duration(d)); err != nil {
				return fmt.Errorf("set idle: %w", err)
			}
			if d == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "profile %s: the VM no longer pauses while idle, until it stops (config: idle: %s)\n", inst.Name, configuredIdle(g, inst))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "profile %s: the VM pauses after %s unused, until it stops (config: idle: %s)\n", inst.Name, d, configuredIdle(g, inst))
			return nil
		},
	}
}
