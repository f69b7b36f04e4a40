package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/instance"
)

func newSyncCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Show and steer the sync mounts (mode: sync)",
		Long: `A sync mount keeps a copy of a host folder on the guest's disk and syncs it both
ways, so containers work on it at native speed. When both sides change the
same file, both versions stay (the host keeps its own, the guest copy its own)
and the path is listed as a conflict until one side is changed to match.`,
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "status",
			Short: "State, last sync and conflicts of each sync mount",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				st, err := runningHostAgent(cmd.Context(), g)
				if err != nil {
					return err
				}
				return writeSyncStatus(cmd.OutOrStdout(), st.Syncs)
			},
		},
		&cobra.Command{
			Use:   "flush [PATH]",
			Short: "Sync now, both ways, and wait until done (every sync mount without PATH)",
			Args:  cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return syncAction(cmd, g, args, false)
			},
		},
		&cobra.Command{
			Use:   "pause",
			Short: "Stop syncing every sync mount until resume (stop and start resume it)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return syncPauseResume(cmd, g, true)
			},
		},
		&cobra.Command{
			Use:   "resume",
			Short: "Resume syncing every sync mount",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return syncPauseResume(cmd, g, false)
			},
		},
		&cobra.Command{
			Use:   "reset PATH",
			Short: "Forget the sync history of the sync mount at PATH: the sides are compared afresh, nothing is deleted",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return syncAction(cmd, g, args, true)
			},
		},
	)
	return cmd
}

// runningHostAgent is the status of the profile's host agent; an error
// when it does not run.
func runningHostAgent(ctx context.Context, g *globals) (*control.Status, error) {
	inst, err := g.existing()
	if err != nil {
		return nil, err
	}
	st := instance.Status(ctx, inst)
	if st.State != instance.StateRunning || st.HostAgent == nil {
		return nil, fmt.Errorf("profile %q is not running (%s); start it with `vmdock start -p %s`", inst.Name, st, inst.Name)
	}
	return st.HostAgent, nil
}

func syncAction(cmd *cobra.Command, g *globals, args []string, reset bool) error {
	if _, err := runningHostAgent(cmd.Context(), g); err != nil {
		return err
	}
	inst, _ := g.existing()
	path := ""
	if len(args) == 1 {
		abs, err := filepath.Abs(args[0])
		if err != nil {
			return fmt.Errorf("path %q: %w", args[0], err)
		}
		path = abs
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
	defer cancel()
	c := control.NewClient(inst.ControlSocketPath())
	if reset {
		if err := c.SyncReset(ctx, path); err != nil {
			return fmt.Errorf("sync reset %s: %w", path, err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "sync history of %s forgotten; the next cycle compares both sides afresh\n", path)
		return nil
	}
	start := time.Now()
	if err := c.SyncFlush(ctx, path); err != nil {
		return fmt.Errorf("sync flush: %w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "synced in %s\n", time.Since(start).Round(10*time.Millisecond))
	return nil
}

func syncPauseResume(cmd *cobra.Command, g *globals, pause bool) error {
	if _, err := runningHostAgent(cmd.Context(), g); err != nil {
		return err
	}
	inst, _ := g.existing()
	c := control.NewClient(inst.ControlSocketPath())
	ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
	defer cancel()
	if pause {
		if err := c.SyncPause(ctx); err != nil {
			return fmt.Errorf("sync pause: %w", err)
		}
		fmt.Fprintln(cmd.OutOrStdout(), "sync paused; `vmdock sync resume` (or stop/start) resumes it")
		return nil
	}
	if err := c.SyncResume(ctx); err != nil {
		return fmt.Errorf("sync resume: %w", err)
	}
	fmt.Fprintln(cmd.OutOrStdout(), "sync resumed")
	return nil
}

func writeSyncStatus(w io.Writer, syncs []control.SyncStatus) error {
	if len(syncs) == 0 {
		_, err := fmt.Fprintln(w, "no sync mounts")
		return err
	}
	for _, sy := range syncs {
		fmt.Fprintf(w, "%s\n", syncLine(sy))
		for _, c := range sy.Conflicts {
			fmt.Fprintf(w, "  conflict: %s (host %s, guest %s): both versions kept; change one side to match the other\n", c.Path, c.Host, c.Guest)
		}
		if sy.MoreConflicts > 0 {
			fmt.Fprintf(w, "  ... and %d more conflicts\n", sy.MoreConflicts)
		}
		for _, p := range sy.Problems {
			fmt.Fprintf(w, "  problem: %s\n", p)
		}
		if sy.LastError != "" {
			fmt.Fprintf(w, "  last error: %s\n", sy.LastError)
		}
	}
	return nil
}

// syncLine is one sync mount in a line: where, state, when last synced,
// and how many conflicts wait.
func syncLine(sy control.SyncStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s -> %s: %s", sy.HostPath, sy.GuestPath, sy.State)
	if !sy.LastSync.IsZero() {
		fmt.Fprintf(&b, ", last sync %s ago", time.Since(sy.LastSync).Round(time.Second))
	}
	fmt.Fprintf(&b, ", %d files", sy.HostFiles)
	if n := uint64(len(sy.Conflicts)) + sy.MoreConflicts; n > 0 {
		fmt.Fprintf(&b, ", %d conflicts (vmdock sync status)", n)
	}
	return b.String()
}
