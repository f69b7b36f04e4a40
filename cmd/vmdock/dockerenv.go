package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/vm/config"
)

// newDockerEnvCmd serves tools that read DOCKER_HOST and ignore contexts
// (some IDE plugins, testcontainers on old versions).
func newDockerEnvCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "docker-env",
		Short: "Print `export DOCKER_HOST=...` for tools that ignore docker contexts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inst, err := g.existing()
			if err != nil {
				return err
			}
			if cfg, err := inst.LoadConfig(g.host); err == nil && cfg.Runtime != config.RuntimeDocker {
				return fmt.Errorf("profile %q runs the %s runtime, which has no Docker socket; use `vmdock nerdctl`, or %s for containerd clients", inst.Name, cfg.Runtime, inst.ContainerdSocketPath())
			}
			fmt.Fprintf(cmd.OutOrStdout(), "export DOCKER_HOST=%s\n", shellQuote("unix://"+inst.DockerSocketPath()))
			return nil
		},
	}
}

// shellQuote makes s one word for sh, whatever characters the path has.
func shellQuote(s string) string {
	out := "'"
	for _, r := range s {
		if r == '\'' {
			out += `'\''`
			continue
		}
		out += string(r)
	}
	return out + "'"
}
