package main

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/vmdock/vmdock/vm/config"
)

// applyArgs declares the config flags on a new flag set, parses args and
// applies what they set onto a copy of saved.
func applyArgs(t *testing.T, saved config.Config, fresh bool, args ...string) (config.Config, []error) {
	t.Helper()
	fs := pflag.NewFlagSet("start", pflag.ContinueOnError)
	defined := defineConfigFlags(fs, config.Default(testHost))
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg := saved
	errs := applyConfigFlags(&cfg, fs, defined, fresh)
	return cfg, errs
}

// savedConfig is a saved config whose values differ from the defaults,
// so a flag applied without being given would show.
func savedConfig() config.Config {
	c := config.Default(testHost)
	c.CPUs = 1
	c.Idle = config.Duration(time.Hour)
	c.Network.DNS = []string{"1.1.1.1"}
	c.Env = map[string]string{"SAVED": "1"}
	return c
}

func TestEveryConfigFlagIsDeclared(t *testing.T) {
	cmd := newStartCmd(&globals{host: testHost})
	seen := map[string]bool{}
	for _, f := range configFlags {
		if seen[f.name] {
			t.Errorf("config flag --%s is in the table twice", f.name)
		}
		seen[f.name] = true
		if cmd.Flags().Lookup(f.name) == nil {
			t.Errorf("config flag --%s: start declares no such flag", f.name)
		}
	}
}

// Each config flag, when given, lands in its config field; a flag that is
// not given leaves the saved value alone.
func TestConfigFlagsLandInConfig(t *testing.T) {
	cases := map[string]struct {
		value string
		got   func(c config.Config) any
		want  any
	}{
		"cpus":       {"3", func(c config.Config) any { return c.CPUs }, 3},
		"memory":     {"1.5", func(c config.Config) any { return c.MemoryGiB }, 1.5},
		"disk":       {"77", func(c config.Config) any { return c.DiskGiB }, 77},
		"arch":       {"riscv", func(c config.Config) any { return c.Arch }, "riscv"},
		"vm-type":    {"vz", func(c config.Config) any { return c.VMType }, "vz"},
		"accel":      {"tcg", func(c config.Config) any { return c.Accel }, "tcg"},
		"mount-type": {"9p", func(c config.Config) any { return c.MountType }, "9p"},
		"mount": {"/srv/x:/x:ro", func(c config.Config) any {
			return len(c.Mounts) == 1 && c.Mounts[0].Location == "/srv/x" && !c.Mounts[0].Writable
		}, true},
		"vz-rosetta":               {"true", func(c config.Config) any { return c.VZRosetta }, true},
		"vz-nested-virtualization": {"true", func(c config.Config) any { return c.VZNested }, true},
		"binfmt":                   {"false", func(c config.Config) any { return c.Binfmt }, false},
		"runtime":                  {"containerd", func(c config.Config) any { return c.Runtime }, "containerd"},
		"disk-sync":                {"none", func(c config.Config) any { return c.DiskSync }, "none"},
		"loopback-alias":           {"true", func(c config.Config) any { return c.Network.LoopbackAlias }, true},
		"loopback-alias-ip":        {"10.1.2.3", func(c config.Config) any { return c.Network.LoopbackAliasIP }, "10.1.2.3"},
		"port-bind":                {"0.0.0.0", func(c config.Config) any { return c.Network.PortBind }, "0.0.0.0"},
		"network-mode":             {"isolated", func(c config.Config) any { return c.Network.Mode }, "isolated"},
		"network-stack":            {"gvisor", func(c config.Config) any { return c.Network.Stack }, "gvisor"},
		"dns":                      {"9.9.9.9", func(c config.Config) any { return c.Network.DNS }, []string{"9.9.9.9"}},
		"env":                      {"A=b", func(c config.Config) any { return c.Env }, map[string]string{"A": "b"}},
		"image":                    {"/tmp/img.tar.zst", func(c config.Config) any { return c.Image }, "/tmp/img.tar.zst"},
		"activate":                 {"false", func(c config.Config) any { return c.Activate }, false},
		"resume":                   {"false", func(c config.Config) any { return c.Resume }, false},
		"idle":                     {"90s", func(c config.Config) any { return time.Duration(c.Idle) }, 90 * time.Second},
		"remote":                   {"ssh://me@build", func(c config.Config) any { return c.Remote.URL }, "ssh://me@build"},
	}
	for _, f := range configFlags {
		tc, ok := cases[f.name]
		if !ok {
			t.Errorf("config flag --%s has no case here: add one", f.name)
			continue
		}
		saved := savedConfig()
		if f.name == "remote" { // only a remote instance takes it when not new
			saved.Remote = &config.Remote{URL: "ssh://old"}
		}
		cfg, errs := applyArgs(t, saved, false, "--"+f.name+"="+tc.value)
		if len(errs) > 0 {
			t.Errorf("--%s=%s: %v", f.name, tc.value, errs)
			continue
		}
		if got := tc.got(cfg); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("--%s=%s: config has %#v, want %#v", f.name, tc.value, got, tc.want)
		}
		if f.name != "cpus" && cfg.CPUs != 1 {
			t.Errorf("--%s=%s changed the saved cpus to %d", f.name, tc.value, cfg.CPUs)
		}
	}
	if cfg, _ := applyArgs(t, savedConfig(), false); !reflect.DeepEqual(cfg, savedConfig()) {
		t.Errorf("no flag given: config %+v, want the saved one untouched %+v", cfg, savedConfig())
	}
}

func TestConfigFlagErrorsAreAllReported(t *testing.T) {
	_, errs := applyArgs(t, savedConfig(), false, "--env", "novalue", "--env", "=x", "--idle", "soon")
	msg := fmt.Sprint(errs)
	for _, want := range []string{`env: "novalue" is not accepted`, `env: "=x" is not accepted`, "--idle:"} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors %q, want one saying %q", msg, want)
		}
	}
}

// A new instance's mount type follows its --vm-type unless --mount-type
// is given too; a saved instance keeps its mount type.
func TestVMTypeFlagResetsMountTypeOnlyWhenFresh(t *testing.T) {
	base := savedConfig()
	base.MountType = "virtiofs"
	if cfg, _ := applyArgs(t, base, true, "--vm-type", "qemu"); cfg.MountType != "" {
		t.Errorf("fresh --vm-type: mount type %q, want it left for FillDefaults", cfg.MountType)
	}
	if cfg, _ := applyArgs(t, base, true, "--vm-type", "qemu", "--mount-type", "9p"); cfg.MountType != "9p" {
		t.Errorf("fresh --vm-type --mount-type 9p: mount type %q, want 9p", cfg.MountType)
	}
	if cfg, _ := applyArgs(t, base, false, "--vm-type", "qemu"); cfg.MountType != "virtiofs" {
		t.Errorf("saved --vm-type: mount type %q, want the saved virtiofs", cfg.MountType)
	}
}

// A new instance's network stack follows --vm-type too, unless it is
// gvisor (both VM types run it) or given with --network-stack.
func TestVMTypeFlagResetsNetworkStackOnlyWhenFresh(t *testing.T) {
	base := config.Default(testHost)
	base.Network.Stack = "vznat"
	if cfg, _ := applyArgs(t, base, true, "--vm-type", "qemu"); cfg.Network.Stack != "" {
		t.Errorf("fresh --vm-type: stack %q, want it left for FillDefaults", cfg.Network.Stack)
	}
	if cfg, _ := applyArgs(t, base, false, "--vm-type", "qemu"); cfg.Network.Stack != "vznat" {
		t.Errorf("saved --vm-type: stack %q, want the saved vznat", cfg.Network.Stack)
	}
	base.Network.Stack = "gvisor"
	if cfg, _ := applyArgs(t, base, true, "--vm-type", "qemu"); cfg.Network.Stack != "gvisor" {
		t.Errorf("fresh --vm-type with gvisor: stack %q, want gvisor kept", cfg.Network.Stack)
	}
	if cfg, _ := applyArgs(t, base, true, "--vm-type", "qemu", "--network-stack", "slirp"); cfg.Network.Stack != "slirp" {
		t.Errorf("fresh --vm-type --network-stack slirp: stack %q, want slirp", cfg.Network.Stack)
	}
}

// The config keeps an image path given relative to the folder start ran
// in as the absolute path of that file: the host agent resolves it
// elsewhere (it once said "no such file" for hack/image/out/...).
func TestImageFlagSavesRelativePathsAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cfg, errs := applyArgs(t, savedConfig(), true, "--image", "out/vmdock-amd64.tar.zst")
	if want := filepath.Join(dir, "out", "vmdock-amd64.tar.zst"); len(errs) > 0 || cfg.Image != want {
		t.Errorf("--image out/...: image %q (%v), want %q", cfg.Image, errs, want)
	}
	if cfg, _ := applyArgs(t, savedConfig(), true, "--image", "vmdock"); cfg.Image != "vmdock" {
		t.Errorf("--image vmdock: image %q, want the catalog name", cfg.Image)
	}
}

// A new remote instance shares no folder unless -V names one; a VM's
// instance does not become a remote one.
func TestRemoteFlag(t *testing.T) {
	cfg, errs := applyArgs(t, config.Default(testHost), true, "--remote", "ssh://build")
	if len(errs) > 0 || cfg.Remote == nil || cfg.Remote.URL != "ssh://build" || len(cfg.Mounts) != 0 {
		t.Errorf("fresh --remote: remote %+v, mounts %v, errors %v; want the URL and no mount", cfg.Remote, cfg.Mounts, errs)
	}
	cfg, errs = applyArgs(t, config.Default(testHost), true, "--remote", "ssh://build", "-V", "/srv/app")
	if len(errs) > 0 || len(cfg.Mounts) != 1 || cfg.Mounts[0].Location != "/srv/app" {
		t.Errorf("fresh --remote -V /srv/app: mounts %v, errors %v; want the one named", cfg.Mounts, errs)
	}
	_, errs = applyArgs(t, savedConfig(), false, "--remote", "ssh://build")
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "this instance runs a VM") || !strings.Contains(errs[0].Error(), "-p NAME") {
		t.Errorf("--remote on a VM's instance: %v; want one error naming another profile", errs)
	}
}
