package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/macos"
	"github.com/vmdock/vmdock/vm/resume"
	"github.com/vmdock/vmdock/vm/store"
)

// startFlags mirror Config; only flags the user gave (Changed) are applied.
type startFlags struct {
	cpus            int
	memory          float64
	disk            int
	arch            string
	vmType          string
	accel           string
	mountType       string
	mounts          []string
	rosetta         bool
	nested          bool
	binfmt          bool
	runtime         string
	diskSync        string
	loopbackAlias   bool
	loopbackAliasIP string
	portBind        string
	networkMode     string
	dns             []string
	env             []string
	image           string
	activate        bool
	resume          bool
	idle            string
	cold            bool
	upgradeImage    bool
	foreground      bool
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
	d := config.Default(g.host)
	fs := cmd.Flags()
	fs.IntVarP(&f.cpus, "cpus", "c", d.CPUs, "number of virtual CPUs (alias --cpu)")
	fs.Float64VarP(&f.memory, "memory", "m", d.MemoryGiB, "memory in GiB")
	fs.IntVarP(&f.disk, "disk", "d", d.DiskGiB, "disk size in GiB (can only grow)")
	fs.StringVar(&f.arch, "arch", d.Arch, "guest architecture: amd64 or arm64")
	fs.StringVar(&f.vmType, "vm-type", d.VMType, "hypervisor: vz (macOS "+macos.MinVZ.String()+"+) or qemu")
	fs.StringVar(&f.accel, "accel", d.Accel, "qemu accelerator: auto (hardware when it really runs a guest, else tcg), kvm, hvf or tcg")
	fs.StringVar(&f.mountType, "mount-type", d.MountType, "folder sharing: virtiofs or 9p")
	fs.StringArrayVarP(&f.mounts, "mount", "V", nil, "share a host folder: path[:guestpath][:ro|rw] (repeatable; default: your home folder, writable)")
	fs.BoolVar(&f.rosetta, "vz-rosetta", d.VZRosetta, "run amd64 binaries with Rosetta (vz on Apple silicon)")
	fs.BoolVar(&f.nested, "vz-nested-virtualization", d.VZNested, "let the guest run KVM itself (vz on macOS 15+ with an M3 or newer)")
	fs.BoolVar(&f.binfmt, "binfmt", d.Binfmt, "run foreign-arch containers through qemu-user")
	fs.StringVar(&f.runtime, "runtime", d.Runtime, "container runtime: docker, or containerd (with `vmdock nerdctl`)")
	fs.StringVar(&f.diskSync, "disk-sync", d.DiskSync, "how guest flushes reach the host disk: full, fsync or none")
	fs.BoolVar(&f.loopbackAlias, "loopback-alias", d.Network.LoopbackAlias, "add --loopback-alias-ip to the host's loopback (uses sudo)")
	fs.StringVar(&f.loopbackAliasIP, "loopback-alias-ip", d.Network.LoopbackAliasIP, "address for --loopback-alias")
	fs.StringVar(&f.portBind, "port-bind", d.Network.PortBind, "host address forwarded ports listen on")
	fs.StringVar(&f.networkMode, "network-mode", d.Network.Mode, "guest network: user or isolated")
	fs.StringArrayVar(&f.dns, "dns", nil, "guest DNS server (repeatable)")
	fs.StringArrayVar(&f.env, "env", nil, "guest environment variable NAME=value (repeatable)")
	fs.StringVar(&f.image, "image", d.Image, "guest image: catalog name, path or URL (default: the built-in image for --arch)")
	fs.BoolVar(&f.activate, "activate", d.Activate, "switch the docker context to this instance")
	fs.BoolVar(&f.resume, "resume", d.Resume, "stop saves the running VM and start resumes it where it was (qemu without 9p/virtiofs shares)")
	fs.StringVar(&f.idle, "idle", d.Idle.String(), "pause the VM after this long unused (no container, connection or session), e.g. 30s or 10m; 0 never; the next use wakes it")
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
	if st.State != instance.StateRunning && st.State != instance.StateStarting {
		if err := offerRosetta(cfg, in, errOut); err != nil {
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
	switch saved, err := config.Load(inst.ConfigPath(), h); {
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
	errs := applyFlags(&cfg, fs, f, old == nil)
	cfg.FillDefaults(h)
	cfg.Normalize()
	errs = append(errs, cfg.ValidateOn(h))
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

// applyFlags copies the flags the user gave onto cfg and returns what could
// not be parsed; Validate judges the values.
func applyFlags(cfg *config.Config, fs *pflag.FlagSet, f *startFlags, fresh bool) []error {
	var errs []error
	set := func(name string, apply func()) {
		if fs.Changed(name) {
			apply()
		}
	}
	set("cpus", func() { cfg.CPUs = f.cpus })
	set("memory", func() { cfg.MemoryGiB = f.memory })
	set("disk", func() { cfg.DiskGiB = f.disk })
	set("arch", func() { cfg.Arch = f.arch })
	set("vm-type", func() {
		cfg.VMType = f.vmType
		if fresh && !fs.Changed("mount-type") {
			// A new instance's default mount type follows its VM type:
			// FillDefaults chooses it again.
			cfg.MountType = ""
		}
	})
	set("accel", func() { cfg.Accel = f.accel })
	set("mount-type", func() { cfg.MountType = f.mountType })
	set("mount", func() {
		cfg.Mounts = nil
		for _, s := range f.mounts {
			m, err := mounts.ParseFlag(s)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			cfg.Mounts = append(cfg.Mounts, config.Mount(m))
		}
	})
	set("vz-rosetta", func() { cfg.VZRosetta = f.rosetta })
	set("vz-nested-virtualization", func() { cfg.VZNested = f.nested })
	set("binfmt", func() { cfg.Binfmt = f.binfmt })
	set("runtime", func() { cfg.Runtime = f.runtime })
	set("disk-sync", func() { cfg.DiskSync = f.diskSync })
	set("loopback-alias", func() { cfg.Network.LoopbackAlias = f.loopbackAlias })
	set("loopback-alias-ip", func() { cfg.Network.LoopbackAliasIP = f.loopbackAliasIP })
	set("port-bind", func() { cfg.Network.PortBind = f.portBind })
	set("network-mode", func() { cfg.Network.Mode = f.networkMode })
	set("dns", func() { cfg.Network.DNS = f.dns })
	set("env", func() {
		cfg.Env = map[string]string{}
		for _, kv := range f.env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				errs = append(errs, fmt.Errorf("env: %q is not accepted; accepted: NAME=value", kv))
				continue
			}
			cfg.Env[k] = v
		}
	})
	set("image", func() { cfg.Image = f.image })
	set("activate", func() { cfg.Activate = f.activate })
	set("resume", func() { cfg.Resume = f.resume })
	set("idle", func() {
		d, err := config.ParseDuration(f.idle)
		if err != nil {
			errs = append(errs, fmt.Errorf("--idle: %w", err))
			return
		}
		cfg.Idle = d
	})
	return errs
}
