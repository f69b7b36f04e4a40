package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vmdock/vmdock/dockerhost/dockersock"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

// dockerSockLinker is the Linker for this machine's link path: the
// default, or the one the environment names.
func dockerSockLinker(out io.Writer) (*dockersock.Linker, error) {
	home, err := store.Home()
	if err != nil {
		return nil, err
	}
	path := os.Getenv(dockersock.PathEnv)
	if path == "" {
		path = dockersock.DefaultPath
	}
	return dockersock.NewLinker(path, home, out)
}

func newDockerSockCmd(g *globals) *cobra.Command {
	var asJSON bool
	return newHostCmd(&cobra.Command{
		Use:   "docker-sock",
		Short: "Make " + dockersock.DefaultPath + " a link to the instance's docker socket (uses sudo)",
		Long: "For tools that ignore docker contexts and DOCKER_HOST. The link is made and removed through sudo\n" +
			"(unless vmdock runs as root or may write the folder), printing each command first. A socket or file\n" +
			"vmdock did not create is never replaced. After `vmdock stop` the link dangles; `vmdock start` of the\n" +
			"profile makes it live again.\n" +
			"Env " + dockersock.PathEnv + " puts the link at another path.",
	}, dockerSockLinker,
		hostVerb[*dockersock.Linker]{
			use:   "link",
			short: "Point the link at this profile's docker socket",
			run: func(cmd *cobra.Command, l *dockersock.Linker) error {
				return linkDockerSock(cmd, g, l)
			},
		},
		hostVerb[*dockersock.Linker]{
			use:   "unlink",
			short: "Remove the link if vmdock made it (whichever profile it points at)",
			run:   unlinkDockerSock,
		},
		hostVerb[*dockersock.Linker]{
			use:   "status",
			short: "Show what the link path holds: vmdock's link (live or dangling), nothing, or something else",
			flags: func(f *pflag.FlagSet) {
				f.BoolVar(&asJSON, "json", false, "print JSON: path, state (absent, live, dangling, not answering, foreign), target, profile, what")
			},
			run: func(cmd *cobra.Command, l *dockersock.Linker) error {
				return printDockerSockStatus(cmd, l, asJSON)
			},
		},
	)
}

// linkDockerSock points l at the profile's docker socket and says what it
// pointed at before.
func linkDockerSock(cmd *cobra.Command, g *globals, l *dockersock.Linker) error {
	inst, cfg, err := g.existingConfig()
	if err != nil {
		return err
	}
	if cfg.Runtime == config.RuntimeContainerd {
		return fmt.Errorf("profile %q runs the containerd runtime and has no docker socket; its containerd socket is %s", inst.Name, inst.ContainerdSocketPath())
	}
	before, err := l.Link(cmd.Context(), inst.DockerSocketPath())
	if err != nil {
		return err
	}
	switch {
	case before.State == dockersock.Absent:
		fmt.Fprintf(cmd.OutOrStdout(), "linked %s\n", l.Path)
	case before.Profile != inst.Name:
		fmt.Fprintf(cmd.OutOrStdout(), "relinked %s from profile %s\n", l.Path, before.Profile)
	default:
		fmt.Fprintf(cmd.OutOrStdout(), "%s was already linked\n", l.Path)
	}
	return printDockerSockStatus(cmd, l, false)
}

// unlinkDockerSock removes the link if vmdock made it.
func unlinkDockerSock(cmd *cobra.Command, l *dockersock.Linker) error {
	before, err := l.Unlink(cmd.Context())
	if err != nil {
		return err
	}
	if before.State == dockersock.Absent {
		fmt.Fprintf(cmd.OutOrStdout(), "%s: nothing to unlink\n", l.Path)
		return nil
	}
	fmt.Fprintf(cmd.OutOrStdout(), "removed %s (it linked profile %s)\n", l.Path, before.Profile)
	return nil
}

func printDockerSockStatus(cmd *cobra.Command, l *dockersock.Linker, asJSON bool) error {
	st, err := l.Status(cmd.Context())
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), st)
	}
	fmt.Fprintln(cmd.OutOrStdout(), dockersock.Describe(st))
	return nil
}
