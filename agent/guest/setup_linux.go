package guest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos"
)

const (
	hostsMarker = "# vmdock host access"
)

var (
	hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
	envKeyRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// setup prepares the system for this boot. Every step is idempotent, so a
// reconnecting host agent may send it again; failures of independent steps
// are all reported. The slow steps that share nothing (the root's growth,
// the data disk's format and mount, the trust store, and the chain of
// the rest) run side by side: under TCG each is seconds of a boot, and
// the guest has more than one vCPU.
func (s *Server) setup(ctx context.Context, st agent.Setup) error {
	var first setupSteps
	if st.TimeUnixNs > 0 {
		first.add("time", func() error { return s.OS.SetClock(time.Unix(0, st.TimeUnixNs)) })
	}
	if st.Hostname != "" {
		first.add("hostname", func() error { return s.setHostname(st.Hostname) })
	}
	first.add("dns", func() error { return s.rooms().dns.WriteResolvConf(st.DNS) })
	if len(st.Env) > 0 {
		first.add("environment", func() error { return s.setEnv(st.Env) })
	}
	errs := first.run(ctx, s.log())

	var grow, disk, trust, rest setupSteps
	if st.GrowRoot {
		grow.add("grow root", func() error { return s.rooms().disks.GrowRoot(ctx) })
	}
	if st.DataDisk != "" {
		disk.add("data disk", func() error { return s.rooms().disks.SetupDataDisk(ctx, st.DataDisk, st.DataDiskFallback) })
	}
	// Before the daemons start (the OpDocker/OpContainerd requests that
	// follow): they read both only then.
	trust.add("CA certificates and proxy", func() error { return s.rooms().corp.Apply(ctx, st) })
	if st.Binfmt {
		rest.add("binfmt", func() error { return s.rooms().binfmt.EnableQEMU(ctx) })
	}
	if st.Rosetta {
		rest.add("rosetta", func() error { return s.rooms().binfmt.EnableRosetta(ctx) })
	}
	if st.HostAccessIP != "" {
		rest.add("host access", func() error { return s.rooms().host.Setup(ctx, st.HostAccessIP, st.DNS) })
	}
	rest.add("ssh agent", func() error { return s.rooms().ssh.Setup(st.SSHAgent) })

	chains := []*setupSteps{&grow, &disk, &trust, &rest}
	chainErrs := make([][]error, len(chains))
	var wg sync.WaitGroup
	for i, c := range chains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chainErrs[i] = c.run(ctx, s.log())
		}()
	}
	wg.Wait()
	for _, e := range chainErrs {
		errs = append(errs, e...)
	}
	return errors.Join(errs...)
}

// setupSteps is a chain of setup steps run one after the other.
type setupSteps []setupStep

type setupStep struct {
	name string
	run  func() error
}

func (c *setupSteps) add(name string, run func() error) {
	*c = append(*c, setupStep{name, run})
}

// run runs the chain, logging each step's time (at info from a second up:
// under TCG a step that forks a lot costs a minute, and the boot's setup
// step only shows the sum), and returns its steps' errors.
func (c setupSteps) run(ctx context.Context, log *slog.Logger) []error {
	var errs []error
	for _, st := range c {
		start := time.Now()
		err := st.run()
		took := time.Since(start)
		level := slog.LevelDebug
		if took >= time.Second {
			level = slog.LevelInfo
		}
		log.Log(ctx, level, "setup step", "step", st.name, "took", took.Round(time.Millisecond))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", st.name, err))
		}
	}
	return errs
}

func (s *Server) setHostname(name string) error {
	if !hostnameRE.MatchString(name) {
		return fmt.Errorf("hostname %q: use letters, digits and inner dashes, at most 63", name)
	}
	if err := guestos.WriteFile(s.path("/etc/hostname"), []byte(name+"\n"), 0o644); err != nil {
		return err
	}
	if err := s.sys().EditHosts("127.0.1.1", "127.0.1.1\t"+name); err != nil {
		return err
	}
	return s.OS.SetHostname(name)
}

func (s *Server) setEnv(env map[string]string) error {
	keys := make([]string, 0, len(env))
	for k, v := range env {
		if !envKeyRE.MatchString(k) {
			return fmt.Errorf("environment name %q: use letters, digits and _, not starting with a digit", k)
		}
		if strings.ContainsAny(v, "\n\x00") {
			return fmt.Errorf("environment value of %s contains a newline or NUL", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(env[k]))
	}
	return guestos.WriteFile(s.path("/etc/environment"), []byte(b.String()), 0o644)
}
