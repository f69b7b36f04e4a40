package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/layout"
	"github.com/vmdock/vmdock/vm/resume"
	"github.com/vmdock/vmdock/vm/store"
)

// statusJSON is `vmdock status --json`; the field names are documented in
// docs/json.md, so renaming one breaks users' scripts.
type statusJSON struct {
	Profile string `json:"profile"`
	Status  string `json:"status"` // Running, Stopped, Broken
	Reason  string `json:"reason,omitempty"`
	Dir     string `json:"dir"`
	// Format is the instance folder's format (vm/layout): its record, or
	// for a folder an older vmdock left, the one it is detected as until
	// a command migrates it; FormatWrittenBy is the vmdock that recorded it.
	Format          int    `json:"format"`
	FormatWrittenBy string `json:"formatWrittenBy,omitempty"`
	PID             int    `json:"pid,omitempty"`
	// DockerSocket is the docker runtime's socket on the host, and
	// ContainerdSocket the containerd runtime's; the other is left out.
	DockerSocket     string          `json:"dockerSocket,omitempty"`
	ContainerdSocket string          `json:"containerdSocket,omitempty"`
	Config           *config.Config  `json:"config"`
	ConfigError      string          `json:"configError,omitempty"`
	HostAgent        *control.Status `json:"hostAgent,omitempty"`
	LastError        string          `json:"lastError,omitempty"`
	Warnings         []string        `json:"warnings,omitempty"`
	// Image is the image the root disk was made from, and a newer default.
	Image *imageStatusJSON `json:"image,omitempty"`
	// Resumable is the saved VM a stopped instance's next start resumes.
	Resumable *resumableJSON `json:"resumable,omitempty"`
}

// resumableJSON describes a saved VM state (documented in docs/json.md).
type resumableJSON struct {
	SavedAt     time.Time `json:"savedAt"`
	Bytes       int64     `json:"bytes"`
	SaveSeconds float64   `json:"saveSeconds"`
}

// resumable reads the saved state of a stopped instance, if any.
func resumable(inst *store.Instance, state string) *resumableJSON {
	if state != instance.StateStopped {
		return nil
	}
	s, err := resume.Load(inst.SavedStateDir())
	if err != nil {
		return nil
	}
	return &resumableJSON{SavedAt: s.At, Bytes: s.State.Size, SaveSeconds: s.Took.Seconds()}
}

// folderFormat is inst's folder format and who recorded it; g.instance
// has refused a damaged or newer record already.
func folderFormat(inst *store.Instance) (int, string) {
	rec, _, _ := layout.Read(inst)
	f, _ := layout.Detect(inst)
	return f, rec.WrittenBy
}

// listJSON is one element of `vmdock list --json` (documented in docs/json.md).
type listJSON struct {
	Profile string  `json:"profile"`
	Status  string  `json:"status"`
	Reason  string  `json:"reason,omitempty"`
	Arch    string  `json:"arch"`
	CPUs    int     `json:"cpus"`
	Memory  float64 `json:"memory"`
	Disk    int     `json:"disk"`
	Runtime string  `json:"runtime"`
	VMType  string  `json:"vmType"`
	Dir     string  `json:"dir"`
}

func newStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the instance's state and config (exit status 1 unless Running)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inst, err := g.existing()
			if err != nil {
				return err
			}
			st := instance.Status(cmd.Context(), inst)
			s := statusJSON{Profile: inst.Name, Status: st.State, Reason: st.Reason, Dir: inst.Dir, PID: st.PID,
				HostAgent: st.HostAgent, LastError: st.LastError, Resumable: resumable(inst, st.State)}
			s.Format, s.FormatWrittenBy = folderFormat(inst)
			if cfg, err := inst.LoadConfig(g.host); err != nil {
				s.ConfigError = err.Error()
				s.DockerSocket = inst.DockerSocketPath()
			} else {
				// The config's proxy may carry a password.
				cfg.Proxy = cfg.Proxy.Masked()
				s.Config = &cfg
				s.Warnings = cfg.Warnings()
				s.Image = imageStatus(cmd.Context(), inst, cfg)
				if cfg.Runtime == config.RuntimeContainerd {
					s.ContainerdSocket = inst.ContainerdSocketPath()
				} else {
					s.DockerSocket = inst.DockerSocketPath()
				}
			}
			if asJSON {
				err = writeJSON(cmd.OutOrStdout(), s)
			} else {
				err = writeStatusText(cmd.OutOrStdout(), s, st)
			}
			if err != nil {
				return err
			}
			if st.State != instance.StateRunning {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func writeStatusText(w io.Writer, s statusJSON, st instance.LiveStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "profile:\t%s\n", s.Profile)
	if r := s.Resumable; r != nil {
		fmt.Fprintf(tw, "status:\t%s, resumable (saved %s, %.0f MiB)\n", st, r.SavedAt.Local().Format(time.DateTime), float64(r.Bytes)/(1<<20))
	} else {
		fmt.Fprintf(tw, "status:\t%s%s\n", st, pausedSuffix(s.HostAgent))
	}
	fmt.Fprintf(tw, "folder:\t%s\n", s.Dir)
	if s.Config != nil {
		writeConfigLines(tw, s.Config, s.Image)
	} else {
		fmt.Fprintf(tw, "config:\t%s\n", s.ConfigError)
	}
	if st.LastError != "" {
		fmt.Fprintf(tw, "last error:\t%s\n", st.LastError)
	}
	for _, w := range s.Warnings {
		fmt.Fprintf(tw, "warning:\t%s\n", w)
	}
	if s.Status == instance.StateRunning {
		if s.DockerSocket != "" {
			fmt.Fprintf(tw, "docker socket:\t%s\n", s.DockerSocket)
		}
		if s.ContainerdSocket != "" {
			fmt.Fprintf(tw, "containerd socket:\t%s (nerdctl: `vmdock nerdctl`)\n", s.ContainerdSocket)
		}
	}
	if s.HostAgent != nil {
		writeHostAgentLines(tw, s.HostAgent)
	}
	return tw.Flush()
}

// writeConfigLines writes the instance's VM, runtime, image and mounts.
func writeConfigLines(tw io.Writer, c *config.Config, image *imageStatusJSON) {
	if r := c.Remote; r != nil {
		fmt.Fprintf(tw, "remote:\t%s, engine %s, laptop ports for containers %v (no VM)\n", r.URL, r.Socket, r.HostPorts)
		return
	}
	fmt.Fprintf(tw, "vm:\t%s %s, %d CPUs, %g GiB memory, %d GiB disk\n", c.VMType, c.Arch, c.CPUs, c.MemoryGiB, c.DiskGiB)
	fmt.Fprintf(tw, "runtime:\t%s\n", c.Runtime)
	fmt.Fprintf(tw, "network:\t%s\n", networkLine(c.Network.Stack, c.Network.Mode))
	if image != nil {
		fmt.Fprintf(tw, "image:\t%s\n", image.line())
	}
	for _, sh := range mounts.Shares(c.Mounts, c.MountType) {
		mode := "rw"
		if sh.ReadOnly {
			mode = "ro"
		}
		excl := ""
		if len(sh.Exclude) > 0 {
			excl = "; excluded, in the guest only: " + strings.Join(sh.Exclude, ", ")
		}
		if sh.Cache != "" {
			mode += ", cache=" + sh.Cache
		}
		fmt.Fprintf(tw, "mount:\t%s -> %s (%s, %s)%s\n", sh.HostPath, sh.GuestPath, sh.Type, mode, excl)
	}
	for _, sy := range mounts.Syncs(c.Mounts) {
		excl := ""
		if len(sy.Exclude) > 0 {
			excl = "; excluded, in the guest only: " + strings.Join(sy.Exclude, ", ")
		}
		fmt.Fprintf(tw, "mount:\t%s -> %s (sync, rw)%s\n", sy.HostPath, sy.GuestPath, excl)
	}
}

// networkLine names a network stack and mode for people.
func networkLine(stack, mode string) string {
	what := map[string]string{
		driver.NetStackGvisor: "the host agent's user-mode stack",
		driver.NetStackSlirp:  "QEMU's user networking",
		driver.NetStackVZNAT:  "Virtualization.framework's NAT",
	}[stack]
	if what == "" {
		return stack + ", " + mode
	}
	return fmt.Sprintf("%s (%s), %s", stack, what, mode)
}

// relaysLine is the guest's relays through the user-mode stack against
// their caps, and what the caps turned away if anything.
func relaysLine(r *control.NetRelays) string {
	line := fmt.Sprintf("%d/%d UDP flows, %d/%d TCP, %d/%d DNS in flight, %d dials pending",
		r.UDPFlows, r.Caps["udpFlows"], r.TCP, r.Caps["tcp"], r.DNSInFlight, r.Caps["dnsInFlight"], r.PendingDials)
	var turned []string
	for _, c := range []struct {
		n    int64
		what string
	}{
		{r.Dropped.UDPEvicted, "UDP flows evicted"}, {r.Dropped.TCPRefused, "TCP connections refused"},
		{r.Dropped.DNSDropped, "DNS queries dropped"}, {r.Dropped.DialsDeferred, "SYNs to a stuck destination dropped"},
		{r.Dropped.MalformedFrames, "malformed frames dropped"}, {r.Dropped.Panics, "panics recovered"},
	} {
		if c.n > 0 {
			turned = append(turned, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(turned) > 0 {
		line += "; since the VM started: " + strings.Join(turned, ", ")
	}
	return line
}

// watchdogLine is each network path's health and the watchdog's last
// repair: "ports ok, agent ok, relay ok, dns ok; last repair 20:14:33 ports: ...".
func watchdogLine(w *control.WatchdogStatus) string {
	parts := make([]string, len(w.Paths))
	for i, p := range w.Paths {
		parts[i] = p.Path + " ok"
		if !p.OK {
			parts[i] = p.Path + " BROKEN (" + p.Problem + ")"
		}
	}
	line := strings.Join(parts, ", ")
	if r := w.LastRepair; r != nil {
		at := r.At
		if t, err := time.Parse(time.RFC3339, r.At); err == nil {
			at = t.Local().Format("2006-01-02 15:04:05")
		}
		line += fmt.Sprintf("; last repair %s %s: %s", at, r.Path, r.What)
	}
	return line
}

// writeHostAgentLines writes what the running host agent reports.
func writeHostAgentLines(tw io.Writer, h *control.Status) {
	fmt.Fprintf(tw, "host agent:\tpid %d, %s %s\n", h.PID, h.Phase, h.Step)
	if n := h.Network; n != nil {
		fmt.Fprintf(tw, "running on:\t%s\n", networkLine(n.Stack, n.Mode))
		if n.Relays != nil {
			fmt.Fprintf(tw, "relays:\t%s\n", relaysLine(n.Relays))
		}
	}
	if w := h.Watchdog; w != nil {
		fmt.Fprintf(tw, "network paths:\t%s\n", watchdogLine(w))
	}
	if h.Machine.Accel != "" {
		accel := h.Machine.Accel
		if h.Machine.AccelReason != "" {
			accel += " (" + h.Machine.AccelReason + ")"
		}
		if h.Machine.CPUNote != "" {
			accel += "; " + h.Machine.CPUNote
		}
		fmt.Fprintf(tw, "accel:\t%s\n", accel)
	}
	if h.Idle != nil {
		fmt.Fprintf(tw, "idle:\t%s\n", idleLine(h.Idle))
	}
	if c := h.Cost; c != nil {
		fmt.Fprintf(tw, "host cost:\t%s\n", costLine(c))
		fmt.Fprintf(tw, "disks:\t%s\n", disksLine(c.Disks))
	}
	for _, p := range h.Ports {
		fmt.Fprintf(tw, "port:\t%s\n", portLine(p))
	}
	for _, sy := range h.Syncs {
		fmt.Fprintf(tw, "sync:\t%s\n", syncLine(sy))
	}
	for _, sw := range h.Shares {
		fmt.Fprintf(tw, "watch:\t%s\n", shareWatchLine(sw))
	}
	if a := h.SSHAgent; a != nil {
		fmt.Fprintf(tw, "ssh agent:\t%s\n", sshAgentLine(a))
	}
	if d := h.GuestDNS; d != nil {
		fmt.Fprintf(tw, "guest dns:\t%s\n", guestDNSLine(d))
	}
	if line := proxyLine(h.Proxy); line != "" {
		fmt.Fprintf(tw, "proxy:\t%s\n", line)
	}
	if h.CACerts > 0 {
		fmt.Fprintf(tw, "CA certificates:\t%d trusted beyond the guest's stock roots\n", h.CACerts)
	}
	for _, e := range h.Errors {
		fmt.Fprintf(tw, "error:\t%s\n", e)
	}
}

func newListCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List instances",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			home, err := store.Home()
			if err != nil {
				return err
			}
			insts, err := store.List(home)
			if err != nil {
				return err
			}
			rows := make([]listJSON, 0, len(insts))
			for _, inst := range insts {
				st := instance.Status(cmd.Context(), inst)
				r := listJSON{Profile: inst.Name, Status: st.State, Reason: st.Reason, Dir: inst.Dir}
				if c, err := inst.LoadConfig(g.host); err == nil {
					r.Arch, r.CPUs, r.Memory, r.Disk, r.Runtime, r.VMType = c.Arch, c.CPUs, c.MemoryGiB, c.DiskGiB, c.Runtime, c.VMType
				} else if r.Reason == "" {
					r.Reason = "config: " + err.Error()
				}
				rows = append(rows, r)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "PROFILE\tSTATUS\tARCH\tCPUS\tMEMORY\tDISK\tRUNTIME\tVMTYPE")
			for _, r := range rows {
				status := r.Status
				if r.Reason != "" {
					status += ": " + strings.SplitN(r.Reason, "\n", 2)[0]
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%gGiB\t%dGiB\t%s\t%s\n", r.Profile, status, r.Arch, r.CPUs, r.Memory, r.Disk, r.Runtime, r.VMType)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (an array)")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// costLine is the VM's memory and CPU on the host, or why they are not
// known.
func costLine(c *control.HostCost) string {
	var parts []string
	if c.VMResidentBytes > 0 {
		mem := "VM " + sizeText(c.VMResidentBytes) + " resident"
		if c.GuestRAMResidentBytes > 0 {
			mem += " (guest RAM " + sizeText(c.GuestRAMResidentBytes) + ")"
		}
		parts = append(parts, mem)
	}
	if c.CPUPercent != nil {
		parts = append(parts, fmt.Sprintf("CPU %.1f%% of a core over the last %.0f s", *c.CPUPercent, c.CPUWindowSeconds))
	}
	if c.Unmeasured != "" {
		parts = append(parts, "not measured: "+c.Unmeasured)
	}
	if len(parts) == 0 {
		return "measuring"
	}
	return strings.Join(parts, ", ")
}

// disksLine is each disk's space on the host against its size.
func disksLine(disks []control.DiskCost) string {
	var parts []string
	for _, d := range disks {
		if d.Error != "" {
			parts = append(parts, d.Name+": "+d.Error)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s on the host of %s", d.Name, sizeText(d.AllocatedBytes), sizeText(d.SizeBytes)))
	}
	return strings.Join(parts, ", ")
}

// sizeText is n bytes in MiB below a GiB, else in GiB.
func sizeText(n int64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// shareWatchLine says how host edits in a share reach the guest's
// inotify, and which folders of it are left out.
func shareWatchLine(sw control.ShareWatch) string {
	if sw.Watch == "off" {
		return fmt.Sprintf("%s: off (%s)", sw.HostPath, sw.Off)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", sw.HostPath, sw.Watch)
	if sw.Capped {
		b.WriteString(", watch limit reached (part of it unwatched)")
	}
	for i, l := range sw.LeftOut {
		if i == 0 {
			b.WriteString("; left out: ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s)", l.Path, l.Why)
	}
	return b.String()
}

// portLine is one forwarded port: every host address serving it, its
// path, and what is wrong: why it is not served at all (Error), or on
// which address it is missing (Warning).
func portLine(p control.ForwardedPort) string {
	addrs := p.HostAddr
	if len(p.HostAddrs) > 0 {
		addrs = strings.Join(p.HostAddrs, ", ")
	}
	line := fmt.Sprintf("%s/%d -> %s", p.Proto, p.GuestPort, addrs)
	var notes []string
	if p.Error != "" {
		notes = append(notes, p.Error)
	} else if p.Path != "" {
		notes = append(notes, p.Path)
	}
	if p.Warning != "" {
		notes = append(notes, "not on every address: "+p.Warning)
	}
	if len(notes) > 0 {
		line += " (" + strings.Join(notes, "; ") + ")"
	}
	return line
}

// guestDNSLine says where the guest's lookups of outside names go.
func guestDNSLine(d *control.GuestDNSStatus) string {
	switch {
	case d.Error != "":
		return "unknown: " + d.Error
	case len(d.Upstreams) == 0:
		return "no upstream: outside names do not resolve in the guest (vmdock doctor)"
	}
	return strings.Join(d.Upstreams, ", ")
}
