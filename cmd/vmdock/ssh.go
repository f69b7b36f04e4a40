package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/vmdock/vmdock/vm/instance"
)

func newSSHCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "ssh [-- command [args...]]",
		Short: "Open a shell in the guest, or run a command there",
		Example: `  vmdock ssh
  vmdock ssh -- uname -a`,
		RunE: func(cmd *cobra.Command, args []string) error {
			inst, err := g.existing()
			if err != nil {
				return err
			}
			if st := instance.Status(cmd.Context(), inst); st.State != instance.StateRunning {
				return fmt.Errorf("profile %q is not running (%s); start it with `vmdock start -p %s`", inst.Name, st, inst.Name)
			}
			code, err := execVM(cmd.Context(), inst, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
}
