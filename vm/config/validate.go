package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/network/loopback"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/macos"
)

// Limits enforced by Validate.
const (
	MinMemoryGiB = 1
	MaxMemoryGiB = 1024
	MinDiskGiB   = 10 // until images report their own size
	MaxDiskGiB   = 8192
)

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidateOn checks c against host h and reports every problem at once,
// one line each, section by section in the order below.
func (c Config) ValidateOn(h Host) error {
	errs := slices.Concat(
		c.validateMachine(h),
		c.validateGuest(),
		c.validateMounts(h),
		c.validateVZ(h),
		c.validateAccel(h),
		c.validateDiskSync(),
		c.validateImageBaseURL(),
		c.Network.validate(),
		c.validateNetworkStack(),
		validateEnv(c.Env),
		c.validateCorpNet(),
		c.PortForward.validate(),
		c.Domains.validate(),
		c.validateRemote(),
		c.validateSandbox(),
	)
	if err := CheckIdle(c.Idle); err != nil {
		errs = append(errs, err)
	}
	if err := mounts.Check(c.Mounts); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// problems collects a section's errors, one line each.
type problems []error

// bad records that field's value is not accepted, and says what is.
func (p *problems) bad(field string, value any, accepted string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %v is not accepted; accepted: %s", field, quote(value), fmt.Sprintf(accepted, args...)))
}

// validateMachine checks the VM itself: arch, vmType, cpus, memory, disk.
func (c Config) validateMachine(h Host) []error {
	var p problems
	switch c.Arch {
	case driver.ArchAMD64, driver.ArchARM64:
	default:
		p.bad("arch", c.Arch, "amd64 or arm64")
	}
	switch c.VMType {
	case driver.TypeQEMU:
	case driver.TypeVZ:
		if !h.VZ {
			p.bad("vmType", c.VMType, "qemu (vz needs macOS %s or later; this host is %s%s)", macos.MinVZ, h.OS, prefixSpace(h.MacOSVersion))
		} else if c.Arch != h.Arch {
			p.bad("vmType", c.VMType, "qemu when arch (%s) differs from the host's (%s): vz cannot emulate", c.Arch, h.Arch)
		}
	default:
		p.bad("vmType", c.VMType, "vz or qemu")
	}
	if c.CPUs < 1 || c.CPUs > h.CPUs {
		p.bad("cpus", c.CPUs, "1 to %d (this host's cores)", h.CPUs)
	}
	if math.IsNaN(c.MemoryGiB) || c.MemoryGiB < MinMemoryGiB || c.MemoryGiB > MaxMemoryGiB {
		p.bad("memory", c.MemoryGiB, "%d to %d GiB", MinMemoryGiB, MaxMemoryGiB)
	}
	if c.DiskGiB < MinDiskGiB || c.DiskGiB > MaxDiskGiB {
		p.bad("disk", c.DiskGiB, "%d to %d GiB", MinDiskGiB, MaxDiskGiB)
	}
	return p
}

// validateGuest checks what the guest runs: the image and the container
// runtime.
func (c Config) validateGuest() []error {
	var p problems
	if !images.SchemeSupported(c.Image) {
		p.bad("image", shorten(c.Image), images.RefAccepted)
	}
	if c.Runtime != RuntimeDocker && c.Runtime != RuntimeContainerd {
		p.bad("runtime", c.Runtime, "%s, %s", RuntimeDocker, RuntimeContainerd)
	}
	return p
}

// validateMounts checks mountType and each mount's type and cache against
// vmType and the host (mounts.Check, run last, checks their paths).
func (c Config) validateMounts(h Host) []error {
	var p problems
	switch c.MountType {
	case mounts.TypeVirtiofs:
		if c.VMType == driver.TypeQEMU && h.Virtiofsd == "" {
			p.bad("mountType", c.MountType, "9p (no virtiofsd found on PATH, /usr/libexec or /usr/lib/qemu)")
		}
	case mounts.Type9p:
		if c.VMType == driver.TypeVZ {
			p.bad("mountType", c.MountType, "virtiofs (vz has no 9p)")
		}
	default:
		p.bad("mountType", c.MountType, "virtiofs or 9p")
	}
	for _, m := range c.Mounts {
		switch m.Type {
		case "", mounts.Type9p:
			if m.Type != "" && c.VMType == driver.TypeVZ {
				p.bad("mounts[].type", m.Type, "virtiofs (vz has no 9p) for %s", m.Location)
			}
		case mounts.TypeVirtiofs:
			if c.VMType == driver.TypeQEMU && h.Virtiofsd == "" {
				p.bad("mounts[].type", m.Type, "9p for %s (no virtiofsd found)", m.Location)
			}
		default:
			p.bad("mounts[].type", m.Type, "virtiofs, 9p or empty for %s", m.Location)
		}
		if m.Cache != "" && !m.IsSync() {
			typ := m.Type
			if typ == "" {
				typ = c.MountType
			}
			modes := mounts.CacheModes[typ]
			switch {
			case c.VMType == driver.TypeVZ:
				p.bad("mounts[].cache", m.Cache, "empty with vz (its virtiofs has no cache setting) for %s", m.Location)
			case len(modes) > 0 && !slices.Contains(modes, m.Cache):
				p.bad("mounts[].cache", m.Cache, "%s for a %s share (%s)", strings.Join(modes, ", "), typ, m.Location)
			}
		}
	}
	return p
}

// validateVZ checks the vz-only options: vzRosetta and
// vzNestedVirtualization.
func (c Config) validateVZ(h Host) []error {
	var p problems
	if c.VZRosetta {
		switch {
		case c.VMType != driver.TypeVZ:
			p.bad("vzRosetta", true, "false unless vmType is vz (it is %q)", c.VMType)
		case h.Arch != driver.ArchARM64 || c.Arch != driver.ArchARM64:
			p.bad("vzRosetta", true, "false unless host and guest are arm64 (host %s, guest %s)", h.Arch, c.Arch)
		}
	}
	if c.VZNested {
		p = append(p, c.validateNestedVirtualization(h)...)
	}
	return p
}

// validateAccel checks accel against the host's hardware accelerator and
// vmType.
func (c Config) validateAccel(h Host) []error {
	var p problems
	switch c.Accel {
	case driver.AccelAuto, driver.AccelTCG:
	case driver.AccelKVM, driver.AccelHVF:
		if native := h.Accel; c.Accel != native {
			p.bad("accel", c.Accel, "auto or tcg%s", prefixComma(native))
		} else if c.VMType != driver.TypeQEMU {
			p.bad("accel", c.Accel, "auto unless vmType is qemu (vz always uses the hardware)")
		}
	default:
		p.bad("accel", c.Accel, "auto, kvm, hvf or tcg")
	}
	if c.Accel == driver.AccelTCG && c.VMType == driver.TypeVZ {
		p.bad("accel", c.Accel, "auto unless vmType is qemu (vz always uses the hardware)")
	}
	return p
}

// validateDiskSync checks diskSync, how guest disk flushes reach the host.
func (c Config) validateDiskSync() []error {
	var p problems
	switch c.DiskSync {
	case driver.DiskSyncFull, driver.DiskSyncFsync, driver.DiskSyncNone:
	default:
		p.bad("diskSync", c.DiskSync, "full, fsync or none")
	}
	return p
}

// validateImageBaseURL checks imageBaseURL, when set, as image downloads
// will use it.
func (c Config) validateImageBaseURL() []error {
	if c.ImageBaseURL == "" {
		return nil
	}
	if err := images.CheckBaseURL(c.ImageBaseURL); err != nil {
		return []error{fmt.Errorf("imageBaseURL: %w", err)}
	}
	return nil
}

// validateNetworkStack checks network.stack against vmType: each VM type
// has its own stack, and both take gvisor.
func (c Config) validateNetworkStack() []error {
	own := driver.OwnNetStack(c.VMType)
	if c.Network.Stack == own || c.Network.Stack == driver.NetStackGvisor {
		return nil
	}
	var p problems
	p.bad("network.stack", c.Network.Stack, "%s or %s with vmType %s", own, driver.NetStackGvisor, c.VMType)
	return p
}

func (n NetworkConfig) validate() []error {
	var errs []error
	switch n.Mode {
	case driver.NetworkUser, driver.NetworkIsolated:
	default:
		errs = append(errs, fmt.Errorf("network.mode: %q is not accepted; accepted: user or isolated", n.Mode))
	}
	if net.ParseIP(n.PortBind) == nil {
		errs = append(errs, fmt.Errorf("network.portBind: %q is not accepted; accepted: an IP address such as 127.0.0.1 or 0.0.0.0", n.PortBind))
	}
	// The alias goes through the same check `vmdock start` applies when it
	// adds it, so nothing that passes here is refused after the boot.
	if _, err := loopback.ParseIP(n.LoopbackAliasIP); err != nil {
		errs = append(errs, fmt.Errorf("network.loopbackAliasIP: %q is not accepted; accepted: an IPv4 unicast address outside 127.0.0.0/8, such as %s", n.LoopbackAliasIP, DefaultLoopbackAliasIP))
	}
	if !hostAccessIPOK(n.HostAccessIP) {
		errs = append(errs, fmt.Errorf("network.hostAccessIP: %q is not accepted; accepted: an IPv4 unicast address outside 127.0.0.0/8, such as %s", n.HostAccessIP, DefaultHostAccessIP))
	}
	for _, d := range n.DNS {
		if net.ParseIP(d) == nil {
			errs = append(errs, fmt.Errorf("network.dns: %q is not accepted; accepted: IP addresses such as 1.1.1.1", d))
		}
	}
	return errs
}

// hostAccessIPOK: the guest agent puts this address on the guest's lo and
// redirects TCP to it onto the host. A loopback address would capture the
// guest's own 127.x traffic, and unspecified, multicast or broadcast ones
// cannot be an interface address.
func hostAccessIPOK(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4() && !a.IsLoopback() && !a.IsUnspecified() && !a.IsMulticast() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// validateEnv accepts what the guest agent can write to /etc/environment:
// shell-style names and single-line values without NUL.
func validateEnv(env map[string]string) []error {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		if !envKey.MatchString(k) {
			errs = append(errs, fmt.Errorf("env: %s is not accepted; accepted: NAME=value with NAME made of letters, digits and _ (not starting with a digit)", quote(shorten(k)+"=")))
		} else if strings.ContainsAny(env[k], "\n\x00") {
			errs = append(errs, fmt.Errorf("env: the value of %s %s is not accepted; accepted: a value without newline or NUL characters", k, quote(shorten(env[k]))))
		}
	}
	return errs
}

// shorten keeps an echoed value within one readable line.
func shorten(s string) string {
	const max = 60
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Warnings are settings that work but put the user at risk; start and
// status print them, one line each.
func (c Config) Warnings() []string {
	var w []string
	if a, err := netip.ParseAddr(c.Network.PortBind); err == nil && !a.IsLoopback() {
		w = append(w, fmt.Sprintf("network.portBind %s exposes every forwarded port, even ones the guest binds to its own loopback, to other machines that can reach this host; use --port-bind 127.0.0.1 to keep them on this machine", c.Network.PortBind))
	}
	return w
}

func (p PortForward) validate() []error {
	var errs []error
	for i, r := range p.Rules {
		field := fmt.Sprintf("portForward.rules[%d]", i)
		g, gerr := parsePortRange(r.Guest)
		h, herr := parsePortRange(r.Host)
		if gerr != nil {
			errs = append(errs, fmt.Errorf("%s.guest: %q is not accepted; accepted: a port (8080) or range (8000-8010) within 1-65535", field, r.Guest))
		}
		if herr != nil {
			errs = append(errs, fmt.Errorf("%s.host: %q is not accepted; accepted: a port (8080) or range (8000-8010) within 1-65535", field, r.Host))
		}
		if gerr == nil && herr == nil && g[1]-g[0] != h[1]-h[0] {
			errs = append(errs, fmt.Errorf("%s: host %q is not accepted; accepted: a range as long as guest %q", field, r.Host, r.Guest))
		}
		switch r.Proto {
		case "", "tcp", "udp":
		default:
			errs = append(errs, fmt.Errorf("%s.proto: %q is not accepted; accepted: tcp, udp or empty for both", field, r.Proto))
		}
	}
	for _, s := range p.Ignore {
		if _, err := parsePortRange(s); err != nil {
			errs = append(errs, fmt.Errorf("portForward.ignore: %q is not accepted; accepted: a port (22) or range (6000-6010) within 1-65535", s))
		}
	}
	return errs
}

// parsePortRange parses "8080" or "8000-8010" into [first, last].
func parsePortRange(s string) ([2]int, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil || a < 1 || b > 65535 || a > b {
		return [2]int{}, fmt.Errorf("bad port range %q", s)
	}
	return [2]int{a, b}, nil
}

// CheckChange refuses changes an existing instance cannot take: its arch,
// VM type and runtime are fixed at creation and its disk only grows.
func CheckChange(old, new Config) error {
	var errs []error
	fixed := func(field, was, now string) {
		if was != now {
			errs = append(errs, fmt.Errorf("%s: cannot change from %q to %q on an existing instance; accepted: %q (or `vmdock delete` and start again)", field, was, now, was))
		}
	}
	fixed("arch", old.Arch, new.Arch)
	fixed("vmType", old.VMType, new.VMType)
	fixed("runtime", old.Runtime, new.Runtime)
	if new.DiskGiB < old.DiskGiB {
		errs = append(errs, fmt.Errorf("disk: cannot shrink from %d to %d GiB; accepted: %d GiB or more", old.DiskGiB, new.DiskGiB, old.DiskGiB))
	}
	return errors.Join(errs...)
}

// validateNestedVirtualization refuses what the host cannot do for sure;
// the chip (M3 or newer) only vz can tell, when the machine is planned.
func (c Config) validateNestedVirtualization(h Host) []error {
	const field = "vzNestedVirtualization"
	var p problems
	switch v, err := macos.Parse(h.MacOSVersion); {
	case c.VMType != driver.TypeVZ:
		p.bad(field, true, "false unless vmType is vz (it is %q)", c.VMType)
	case h.Arch != driver.ArchARM64:
		p.bad(field, true, "false unless the host is Apple silicon (this one is %s)", h.Arch)
	case err != nil || v.Less(macos.MinNestedVirtualization):
		p.bad(field, true, "false before macOS %s (this host runs %q)", macos.MinNestedVirtualization, h.MacOSVersion)
	}
	return p
}

func prefixSpace(s string) string {
	if s == "" {
		return ""
	}
	return " " + s
}

func prefixComma(s string) string {
	if s == "" {
		return ""
	}
	return ", " + s
}

func quote(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}
