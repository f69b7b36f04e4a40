package main

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/doctor"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

func newDoctorCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this host for what vmdock needs, one line each (exit status 1 when a check fails)",
		Long: "doctor checks the OS, the binary's signature and cgo (macOS), Rosetta, QEMU and its accelerator, virtiofsd, " +
			"the config and image a start would use, socket path lengths, free disk, the docker CLI and context, and the instance. " +
			"Each check is ok, warn or fail with why and what to do; paste the output when you report a problem.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inst, err := g.instance()
			if err != nil {
				return err
			}
			f := doctor.Detect(g.host, inst)
			addDriverFacts(&f)
			f.Config, f.ConfigSource, f.ConfigErr = startConfig(inst, g.host)
			r := doctor.Run(cmd.Context(), f)
			r.Version = Version
			if asJSON {
				err = r.WriteJSON(cmd.OutOrStdout())
			} else {
				err = r.WriteText(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if r.Failed() {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: {version, checks: [{name, status, message, fix}], summary: {ok, warn, fail}}")
	return cmd
}

// startConfig is the config a plain `vmdock start` of inst would run (no
// flags) and where it comes from. When the saved config or template cannot
// be read, err says why and cfg is the defaults, so the other checks still
// have something to judge.
func startConfig(inst *store.Instance, h config.Host) (cfg config.Config, source string, err error) {
	home := filepath.Dir(inst.Dir)
	cfg, err = inst.LoadConfig(h)
	source = "saved config " + inst.ConfigPath()
	if errors.Is(err, os.ErrNotExist) {
		source = "defaults"
		if _, serr := os.Stat(templatePath(home)); serr == nil {
			source = "template " + templatePath(home)
		}
		cfg, err = baseConfig(home, h)
	}
	if err != nil {
		cfg = config.Default(h)
	}
	cfg.Normalize()
	return cfg, source, err
}
