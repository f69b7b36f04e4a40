package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vmdock/vmdock/network/loopback"
	"github.com/vmdock/vmdock/vm/store"
)

// newLoopbackManager is a variable so CLI tests can swap in a Manager
// whose commands never reach this machine's loopback.
var newLoopbackManager = func(out io.Writer) (*loopback.Manager, error) {
	home, err := store.Home()
	if err != nil {
		return nil, err
	}
	return loopback.NewManager(home, out), nil
}

func newLoopbackAliasCmd() *cobra.Command {
	var ip string
	var persist bool
	cmd := &cobra.Command{
		Use:   "loopback-alias",
		Short: "Put " + loopback.DefaultIP + " on the host's loopback (uses sudo)",
		Long: "Containers reach the host as " + loopback.DefaultIP + " and host.docker.internal without this.\n" +
			"The alias lets host programs use the same address too (for example an IDE's xdebug settings).\n" +
			"Every command that needs root is printed before it runs through sudo.",
	}
	cmd.PersistentFlags().StringVar(&ip, "ip", loopback.DefaultIP, "alias address (IPv4)")
	// Through the variable at run time, so tests can swap the Manager.
	open := func(echo io.Writer) (*loopback.Manager, error) { return newLoopbackManager(echo) }
	return newHostCmd(cmd, open,
		hostVerb[*loopback.Manager]{
			use:   "add",
			short: "Add the alias; --persist also re-adds it at every boot",
			flags: func(f *pflag.FlagSet) {
				f.BoolVar(&persist, "persist", false, "install a boot-time service (systemd unit on Linux, launchd daemon on macOS)")
			},
			run: func(cmd *cobra.Command, m *loopback.Manager) error {
				if err := m.Add(cmd.Context(), ip, persist); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "loopback alias %s added\n", ip)
				return nil
			},
		},
		hostVerb[*loopback.Manager]{
			use:   "remove",
			short: "Undo exactly what add did",
			run: func(cmd *cobra.Command, m *loopback.Manager) error {
				if err := m.Remove(cmd.Context(), ip); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "loopback alias %s removed\n", ip)
				return nil
			},
		},
		hostVerb[*loopback.Manager]{
			use:   "status",
			short: "Show whether the alias is present and what vmdock did",
			run: func(cmd *cobra.Command, m *loopback.Manager) error {
				st, err := m.Status(cmd.Context(), ip)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), describeLoopbackStatus(st))
				return nil
			},
		},
	)
}

func describeLoopbackStatus(st loopback.Status) string {
	var parts []string
	if st.Present {
		parts = append(parts, "present on the loopback")
	} else {
		parts = append(parts, "not on the loopback")
	}
	if st.Persisted {
		parts = append(parts, "persisted at boot")
	}
	switch {
	case st.Recorded == nil:
		parts = append(parts, "not managed by vmdock")
	case st.Recorded.Added:
		parts = append(parts, "added by vmdock")
	default:
		parts = append(parts, "already present when vmdock was asked to add it")
	}
	return st.IP + ": " + strings.Join(parts, ", ")
}
