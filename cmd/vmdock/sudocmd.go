package main

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// hostVerb is one subcommand of a command that changes the host through
// sudo: it runs on the tool (T) that prints each sudo command before it
// runs it.
type hostVerb[T any] struct {
	use, short string
	flags      func(*pflag.FlagSet) // nil: no flags of its own
	run        func(cmd *cobra.Command, tool T) error
}

// newHostCmd completes parent (Use, Short, Long and any persistent flags
// set) into a command that prints its help, with one subcommand per verb;
// each opens its tool with open, echoing to stderr so stdout keeps only
// the result.
func newHostCmd[T any](parent *cobra.Command, open func(echo io.Writer) (T, error), verbs ...hostVerb[T]) *cobra.Command {
	parent.Args = cobra.NoArgs
	parent.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	for _, v := range verbs {
		sub := &cobra.Command{
			Use:   v.use,
			Short: v.short,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				tool, err := open(cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				return v.run(cmd, tool)
			},
		}
		if v.flags != nil {
			v.flags(sub.Flags())
		}
		parent.AddCommand(sub)
	}
	return parent
}
