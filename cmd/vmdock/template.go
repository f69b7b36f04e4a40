package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

const templateHeader = `# vmdock default config for new instances (vmdock template --edit).
# Every field is documented in docs/configuration.md; flags of 'vmdock start' override it.
`

func newTemplateCmd(g *globals) *cobra.Command {
	var edit bool
	cmd := &cobra.Command{
		Use:   "template",
		Short: "Print (or --edit) the default config new instances start from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			home, err := store.Home()
			if err != nil {
				return err
			}
			path := templatePath(home)
			if !edit {
				b, err := config.Read(path)
				if errors.Is(err, os.ErrNotExist) {
					if b, err = defaultTemplate(g.host); err != nil {
						return err
					}
				} else if err != nil {
					return fmt.Errorf("read template: %w", err)
				}
				_, err = cmd.OutOrStdout().Write(b)
				return err
			}
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				b, err := defaultTemplate(g.host)
				if err != nil {
					return err
				}
				if err := os.MkdirAll(home, 0o700); err != nil {
					return fmt.Errorf("create vmdock home: %w", err)
				}
				if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
					return fmt.Errorf("write template: %w", err)
				}
			}
			editor := firstNonEmpty(os.Getenv("VISUAL"), os.Getenv("EDITOR"), "vi")
			// The editor string may carry arguments ("code -w"), so a shell runs it.
			ed := exec.CommandContext(cmd.Context(), "/bin/sh", "-c", editor+` "$1"`, "editor", path)
			ed.Stdin, ed.Stdout, ed.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			if err := ed.Run(); err != nil {
				return fmt.Errorf("editor %q: %w", editor, err)
			}
			cfg, err := config.Load(path, g.host)
			if err == nil {
				cfg.Normalize()
				err = cfg.ValidateOn(g.host)
			}
			if err != nil {
				return fmt.Errorf("template %s is not valid, run `vmdock template --edit` again:\n%w", path, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "template %s saved\n", path)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&edit, "edit", "e", false, "edit the template in $VISUAL / $EDITOR")
	return cmd
}

func defaultTemplate(h config.Host) ([]byte, error) {
	b, err := config.Default(h).Marshal()
	if err != nil {
		return nil, err
	}
	return append([]byte(templateHeader), b...), nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
