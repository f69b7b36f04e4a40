package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/resume"
	"github.com/vmdock/vmdock/vm/store"
)

// startFlags are start's flags: those that set the config (configFlags)
// and those for this start only.
type startFlags struct {
	config       []definedConfigFlag
	cold         bool
	upgradeImage bool
	foreground   bool
}

func newStartCmd(g *globals) *cobra.Command {
	var f startFlags
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Create or start the instance; flags given are saved to its config",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStart(cmd.Context(), g, cmd.Flags(), &f, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	f.config = defineConfigFlags(fs, config.Default(g.host))
	fs.BoolVar(&f.cold, "cold", false, "boot cold this once: drop a saved VM state instead of resuming it")
	fs.BoolVar(&f.upgradeImage, "upgrade-image", false, "remake the root disk from the image a new instance would get (boots cold; the data disk with images and volumes is kept)")
	fs.BoolVar(&f.foreground, "foreground", false, "run the host agent in this process until interrupted")
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "cpu" {
			name = "cpus"
		}
		return pflag.NormalizedName(name)
	})
	return cmd
}

func runStart(ctx context.Context, g *globals, fs *pflag.FlagSet, f *startFlags, in io.Reader, out, errOut io.Writer) error {
	inst, err := g.instance()
	if err != nil {
		return err
	}
	cfg, old, err := plannedConfig(inst, g.host, fs, f)
	if err != nil {
		return err
	}
	if err := instance.CheckSocketPaths(inst, cfg); err != nil {
		return err
	}
	st := instance.Status(ctx, inst)
	if (st.State == instance.StateRunning || st.State == instance.StateStarting) && old != nil && !reflect.DeepEqual(*old, cfg) {
		return fmt.Errorf("profile %q is running; its settings change only when stopped: run `vmdock stop -p %s` first", inst.Name, inst.Name)
	}
	if f.upgradeImage && cfg.IsRemote() {
		return fmt.Errorf("--upgrade-image: profile %q is a remote instance (%s); it has no VM image", inst.Name, cfg.Remote.URL)
	}
	if st.State != instance.StateRunning && st.State != instance.StateStarting && !cfg.IsRemote() {
		if err := offerRosetta(ctx, cfg, in, errOut); err != nil {
			return err
		}
		if err := prepareImage(ctx, inst, cfg, f.upgradeImage, out); err != nil {
			return err
		}
	}
	// Everything is checked: only now may the instance folder change.
	if err := inst.Create(); err != nil {
		return err
	}
	lock, err := instance.Lock(ctx, inst)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if err := cfg.Save(inst.ConfigPath()); err != nil {
		return err
	}
	if err := inst.RecordDataRuntime(cfg.Runtime); err != nil {
		return err
	}
	printWarnings(errOut, cfg.Warnings())
	if f.cold && st.State != instance.StateRunning && st.State != instance.StateStarting {
		if resume.Exists(inst.SavedStateDir()) {
			fmt.Fprintln(out, "booting cold (--cold): the saved VM state is dropped")
		}
		if err := resume.Remove(inst.SavedStateDir()); err != nil {
			return err
		}
	}
	if f.upgradeImage {
		if st.State == instance.StateRunning || st.State == instance.StateStarting {
			return fmt.Errorf("profile %q is running; --upgrade-image remakes its root disk: run `vmdock stop -p %s` first", inst.Name, inst.Name)
		}
		if err := requestImageUpgrade(inst, out); err != nil {
			return err
		}
		// The host agent removes the request once the new disk is in place;
		// a start that failed before that must not upgrade a later one.
		defer os.Remove(inst.UpgradeImagePath())
	}
	if f.foreground {
		lock.Unlock() // the host agent must stay stoppable by `vmdock stop`
		return runHostAgent(ctx, inst, g.host)
	}
	return startVM(ctx, inst, cfg, instance.StartOptions{Progress: out})
}

// plannedConfig is the config `start` would save on host h: the saved one
// (or the template, or the defaults) with the given flags on top. It
// returns every problem at once and touches no file. old is the saved
// config, if any.
func plannedConfig(inst *store.Instance, h config.Host, fs *pflag.FlagSet, f *startFlags) (cfg config.Config, old *config.Config, err error) {
	switch saved, err := inst.LoadConfig(h); {
	case err == nil:
		old = &saved
		cfg = saved
	case errors.Is(err, os.ErrNotExist):
		if cfg, err = baseConfig(filepath.Dir(inst.Dir), h); err != nil {
			return cfg, nil, err
		}
	default:
		return cfg, nil, err
	}
	errs := applyConfigFlags(&cfg, fs, f.config, old == nil)
	cfg.FillDefaults(h)
	cfg.Normalize()
	errs = append(errs, cfg.ValidateOn(h))
	errs = append(errs, cfg.CheckSecrets(config.HostSecrets)...)
	if old != nil {
		errs = append(errs, config.CheckChange(*old, cfg))
	}
	// The data disk outlives a config edit or a `delete` without --data,
	// and holds one runtime's images and containers.
	if rt, ok := inst.DataRuntime(); ok && rt != cfg.Runtime && (old == nil || old.Runtime == cfg.Runtime) {
		errs = append(errs, fmt.Errorf("runtime: %q: the data disk holds %s's images and containers; accepted: %q (or `vmdock delete --data -p %s` and start again)", cfg.Runtime, rt, rt, inst.Name))
	}
	return cfg, old, errors.Join(errs...)
}

// templatePath is the user's default config for new instances.
func templatePath(home string) string { return filepath.Join(home, "template.yaml") }

// baseConfig is the template when the user has one, else the defaults.
func baseConfig(home string, h config.Host) (config.Config, error) {
	cfg, err := config.Load(templatePath(home), h)
	if errors.Is(err, os.ErrNotExist) {
		return config.Default(h), nil
	}
	return cfg, err
}
