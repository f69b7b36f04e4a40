package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/macos"
)

// configFlag is one `start` flag that sets a config field: adding such a
// flag is one entry in configFlags.
type configFlag struct {
	name string
	// define declares the flag on fs, its default (if any) read from d,
	// and returns what copies the value the user gave onto a config.
	define func(fs *pflag.FlagSet, d config.Config) applyFlag
}

// applyFlag copies a flag's value onto cfg; an error says why the value
// cannot be taken (Validate judges the values it takes).
type applyFlag func(cfg *config.Config, a applyContext) error

// applyContext is what applying a flag may consult beyond its own value.
type applyContext struct {
	fresh   bool                   // the instance has no saved config yet
	changed func(name string) bool // whether the user gave that flag
}

// configFlags are start's config flags, in the order they apply.
var configFlags = []configFlag{
	intFlag("cpus", "c", func(c *config.Config) *int { return &c.CPUs }, "number of virtual CPUs (alias --cpu)"),
	floatFlag("memory", "m", func(c *config.Config) *float64 { return &c.MemoryGiB }, "memory in GiB"),
	intFlag("disk", "d", func(c *config.Config) *int { return &c.DiskGiB }, "disk size in GiB (can only grow)"),
	stringFlag("arch", func(c *config.Config) *string { return &c.Arch }, "guest architecture: amd64 or arm64"),
	{name: "vm-type", define: defineVMType},
	stringFlag("accel", func(c *config.Config) *string { return &c.Accel }, "qemu accelerator: auto (hardware when it really runs a guest, else tcg), kvm, hvf or tcg"),
	stringFlag("mount-type", func(c *config.Config) *string { return &c.MountType }, "folder sharing: virtiofs or 9p"),
	{name: "mount", define: defineMounts},
	boolFlag("vz-rosetta", func(c *config.Config) *bool { return &c.VZRosetta }, "run amd64 binaries with Rosetta (vz on Apple silicon)"),
	boolFlag("vz-nested-virtualization", func(c *config.Config) *bool { return &c.VZNested }, "let the guest run KVM itself (vz on macOS 15+ with an M3 or newer)"),
	boolFlag("binfmt", func(c *config.Config) *bool { return &c.Binfmt }, "run foreign-arch containers through qemu-user"),
	stringFlag("runtime", func(c *config.Config) *string { return &c.Runtime }, "container runtime: docker, or containerd (with `vmdock nerdctl`)"),
	stringFlag("disk-sync", func(c *config.Config) *string { return &c.DiskSync }, "how guest flushes reach the host disk: full, fsync or none"),
	boolFlag("loopback-alias", func(c *config.Config) *bool { return &c.Network.LoopbackAlias }, "add --loopback-alias-ip to the host's loopback (uses sudo)"),
	stringFlag("loopback-alias-ip", func(c *config.Config) *string { return &c.Network.LoopbackAliasIP }, "address for --loopback-alias"),
	stringFlag("port-bind", func(c *config.Config) *string { return &c.Network.PortBind }, "host address forwarded ports listen on"),
	stringFlag("network-mode", func(c *config.Config) *string { return &c.Network.Mode }, "guest network: user or isolated"),
	stringFlag("network-stack", func(c *config.Config) *string { return &c.Network.Stack }, "what carries the guest's network: gvisor (the host agent's own stack; a new instance's default), or the VM type's own, slirp (qemu) or vznat (vz); an instance whose config names none keeps the one it ran"),
	{name: "dns", define: defineDNS},
	{name: "env", define: defineEnv},
	{name: "image", define: defineImage},
	boolFlag("activate", func(c *config.Config) *bool { return &c.Activate }, "switch the docker context to this instance"),
	boolFlag("resume", func(c *config.Config) *bool { return &c.Resume }, "stop saves the running VM and start resumes it where it was (qemu without 9p/virtiofs shares)"),
	{name: "idle", define: defineIdle},
	{name: "remote", define: defineRemote},
}

// fieldFlag is a flag whose value is copied as is onto the config field
// field points at, which also gives its default.
func fieldFlag[T any](name string, field func(*config.Config) *T, declare func(fs *pflag.FlagSet, def T) *T) configFlag {
	return configFlag{name: name, define: func(fs *pflag.FlagSet, d config.Config) applyFlag {
		v := declare(fs, *field(&d))
		return func(cfg *config.Config, _ applyContext) error {
			*field(cfg) = *v
			return nil
		}
	}}
}

func intFlag(name, short string, field func(*config.Config) *int, usage string) configFlag {
	return fieldFlag(name, field, func(fs *pflag.FlagSet, def int) *int { return fs.IntP(name, short, def, usage) })
}

func floatFlag(name, short string, field func(*config.Config) *float64, usage string) configFlag {
	return fieldFlag(name, field, func(fs *pflag.FlagSet, def float64) *float64 { return fs.Float64P(name, short, def, usage) })
}

func stringFlag(name string, field func(*config.Config) *string, usage string) configFlag {
	return fieldFlag(name, field, func(fs *pflag.FlagSet, def string) *string { return fs.String(name, def, usage) })
}

func boolFlag(name string, field func(*config.Config) *bool, usage string) configFlag {
	return fieldFlag(name, field, func(fs *pflag.FlagSet, def bool) *bool { return fs.Bool(name, def, usage) })
}

func defineVMType(fs *pflag.FlagSet, d config.Config) applyFlag {
	v := fs.String("vm-type", d.VMType, "hypervisor: vz (macOS "+macos.MinVZ.String()+"+) or qemu")
	return func(cfg *config.Config, a applyContext) error {
		cfg.VMType = *v
		if a.fresh && !a.changed("mount-type") {
			// A new instance's default mount type follows its VM type:
			// FillDefaults chooses it again.
			cfg.MountType = ""
		}
		if a.fresh && !a.changed("network-stack") && cfg.Network.Stack != config.DefaultNetworkStack(cfg.VMType) {
			// A VM type's own stack (a template's slirp, say) does not
			// carry over to the other type: FillDefaults picks again.
			cfg.Network.Stack = ""
		}
		return nil
	}
}

func defineMounts(fs *pflag.FlagSet, _ config.Config) applyFlag {
	v := fs.StringArrayP("mount", "V", nil, "share a host folder: path[:guestpath][:ro|rw] (repeatable; default: your home folder, writable)")
	return func(cfg *config.Config, _ applyContext) error {
		var errs []error
		cfg.Mounts = nil
		for _, s := range *v {
			m, err := mounts.ParseFlag(s)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			cfg.Mounts = append(cfg.Mounts, config.Mount(m))
		}
		return errors.Join(errs...)
	}
}

// defineImage takes a relative image path as the file it names here: the
// host agent resolves the saved reference elsewhere, and later starts run
// from other folders.
func defineImage(fs *pflag.FlagSet, d config.Config) applyFlag {
	v := fs.String("image", d.Image, "guest image: catalog name, path or URL (default: the built-in image for --arch)")
	return func(cfg *config.Config, _ applyContext) error {
		ref, err := images.AbsRef(*v)
		cfg.Image = ref
		return err
	}
}

func defineDNS(fs *pflag.FlagSet, _ config.Config) applyFlag {
	v := fs.StringArray("dns", nil, "guest DNS server (repeatable)")
	return func(cfg *config.Config, _ applyContext) error {
		cfg.Network.DNS = *v
		return nil
	}
}

func defineEnv(fs *pflag.FlagSet, _ config.Config) applyFlag {
	v := fs.StringArray("env", nil, "guest environment variable NAME=value (repeatable)")
	return func(cfg *config.Config, _ applyContext) error {
		var errs []error
		cfg.Env = map[string]string{}
		for _, kv := range *v {
			k, val, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				errs = append(errs, fmt.Errorf("env: %q is not accepted; accepted: NAME=value", kv))
				continue
			}
			cfg.Env[k] = val
		}
		return errors.Join(errs...)
	}
}

func defineIdle(fs *pflag.FlagSet, d config.Config) applyFlag {
	v := fs.String("idle", d.Idle.String(), "pause the VM after this long unused (no container, connection or session), e.g. 30s or 10m; 0 never; the next use wakes it")
	return func(cfg *config.Config, _ applyContext) error {
		d, err := config.ParseDuration(*v)
		if err != nil {
			return fmt.Errorf("--idle: %w", err)
		}
		cfg.Idle = d
		return nil
	}
}

// definedConfigFlag is a config flag declared on a flag set.
type definedConfigFlag struct {
	name  string
	apply applyFlag
}

// defineConfigFlags declares every config flag on fs, defaults from d.
func defineConfigFlags(fs *pflag.FlagSet, d config.Config) []definedConfigFlag {
	defined := make([]definedConfigFlag, len(configFlags))
	for i, f := range configFlags {
		defined[i] = definedConfigFlag{name: f.name, apply: f.define(fs, d)}
	}
	return defined
}

// applyConfigFlags copies the flags the user gave (Changed on fs) onto
// cfg, leaving the saved values of the others, and returns what could not
// be parsed; Validate judges the values.
func applyConfigFlags(cfg *config.Config, fs *pflag.FlagSet, flags []definedConfigFlag, fresh bool) []error {
	a := applyContext{fresh: fresh, changed: fs.Changed}
	var errs []error
	for _, f := range flags {
		if !fs.Changed(f.name) {
			continue
		}
		if err := f.apply(cfg, a); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// defineRemote makes a new instance a remote one. A new remote instance
// shares no folder unless -V names one: never the whole home unasked.
func defineRemote(fs *pflag.FlagSet, _ config.Config) applyFlag {
	v := fs.String("remote", "", "use a Linux server's own Docker engine over ssh, no VM: ssh://[user@]host[:port] (a new instance; see docs/remote.md)")
	return func(cfg *config.Config, a applyContext) error {
		if !a.fresh && cfg.Remote == nil {
			return fmt.Errorf("--remote %q: this instance runs a VM; make a remote one under another profile: vmdock -p NAME start --remote URL", *v)
		}
		if cfg.Remote == nil {
			cfg.Remote = &config.Remote{}
		}
		cfg.Remote.URL = *v
		if a.fresh && !a.changed("mount") {
			cfg.Mounts = nil
		}
		return nil
	}
}
