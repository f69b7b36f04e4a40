package hostagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/agentbin"
	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/internal/connpipe"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/network/forward"
	"github.com/vmdock/vmdock/network/usernet"
	"github.com/vmdock/vmdock/vm/cidata"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/filesync"
	"github.com/vmdock/vmdock/vm/logfile"
)

// testKernelAppendEnv adds kernel parameters to a direct-kernel boot: the
// e2e boots a guest that panics with it. Not a user setting.
const testKernelAppendEnv = "VMDOCK_TEST_KERNEL_APPEND"

// Guest devices follow the order of Spec.Disks: root, data, boot disk.
// The guest finds root and data by their serials; these names by attach
// order are the fallback of a guest without udev's by-id links.
const (
	guestRootDevice = "/dev/vda"
	guestDataDevice = "/dev/vdb"
)

// rootDiskHeadroom is added to the image's disk for the guest's own
// packages and logs; container data lives on the data disk.
const rootDiskHeadroom = 4 << 30

// bootSteps is the whole start sequence; each step's undo reverses it.
// Steps hand their results on through the hostAgent's fields (img, spec,
// machine, client, tunnels), in this order.
func (ha *hostAgent) bootSteps() []step {
	rt := runtimeFor(ha.cfg.Runtime)
	return []step{
		{name: "host-settings", run: ha.stepHostSettings},
		{name: "image", run: ha.stepImage},
		{name: "saved-state", run: ha.stepSavedState},
		{name: "disks", run: ha.stepDisks},
		{name: "boot-disk", run: ha.stepBootDisk},
		{name: "spec", run: ha.stepSpec},
		{name: "vm", run: ha.stepVM, undo: ha.undoVM},
		{name: "agent", run: ha.connectAgent, undo: ha.undoAgent},
		{name: "setup", run: ha.stepSetup},
		{name: "mounts", run: ha.stepMounts},
		{name: "sync", run: ha.files.syncs.Start, undo: ha.files.syncs.Stop},
		{name: rt.name, run: ha.stepRuntime},
		{name: "tunnels", run: ha.stepTunnels, undo: ha.undoTunnels},
		{name: rt.name + "-ping", run: ha.stepRuntimePing},
		{name: "domains", run: ha.stepDomains, undo: ha.undoDomains},
	}
}

// stepImage finds (or fetches) the image and builds the VM spec from it;
// nothing on the instance's disks changes yet, so a saved state can still
// be judged against them.
func (ha *hostAgent) stepImage(ctx context.Context) error {
	opts := images.Options{Progress: os.Stderr, BaseURL: ha.cfg.ImageBaseURL}
	ha.boot.upgradeImage = fileExists(ha.inst.UpgradeImagePath())
	if !ha.boot.upgradeImage && fileExists(ha.inst.DiskPath()) {
		// The root disk's /usr/lib/modules belong to the kernel of the
		// image it was made from: boot that one, not a newer default.
		opts.Pin = ha.inst.PinnedImage()
	}
	img, err := images.Ensure(ctx, ha.cfg.Image, ha.cfg.Arch, opts)
	if err != nil {
		return err
	}
	if ha.boot.upgradeImage && img.Digest == ha.inst.PinnedImage() && fileExists(ha.inst.DiskPath()) {
		ha.events.Emit("image", control.EventNote, "", "--upgrade-image: the instance already runs the newest image ("+img.Digest+"); the root disk is kept")
		ha.boot.upgradeImage = false
		if err := removeIfExists(ha.inst.UpgradeImagePath()); err != nil {
			return err
		}
	}
	// `vmdock image prune` keeps what an instance recorded here, and the
	// next start boots exactly this image.
	if err := atomicfile.WriteFile(filepath.Join(ha.inst.Dir, images.DigestFileName), []byte(img.Digest+"\n"), 0o600); err != nil {
		return fmt.Errorf("record image digest: %w", err)
	}
	spec, err := ha.buildSpec(img)
	if err != nil {
		return err
	}
	drv, err := newDriver(ha.cfg.VMType)
	if err != nil {
		return err
	}
	ha.boot.img, ha.boot.spec, ha.boot.driver = img, spec, drv
	return nil
}

// stepDisks creates or grows the disks; a resumed VM needs them exactly
// as they were saved.
func (ha *hostAgent) stepDisks(context.Context) error {
	if ha.boot.resumeFrom != nil {
		return nil
	}
	return ha.prepareDisks(ha.boot.img)
}

func (ha *hostAgent) stepBootDisk(context.Context) error {
	if ha.boot.resumeFrom != nil {
		return nil // the resumed guest read it at its boot
	}
	return ha.writeBootDisk()
}

// stepSpec has the driver check the spec and prepare its plan once, and
// records the spec (spec.json) before anything runs.
func (ha *hostAgent) stepSpec(context.Context) error {
	plan, err := ha.boot.driver.Prepare(ha.boot.spec)
	if err != nil {
		return err
	}
	ha.boot.plan = plan
	return writeSpec(ha.inst.SpecPath(), ha.boot.spec)
}

// stepVM resumes the saved VM, or boots it, and records the network
// stack it runs on: a config that names none keeps that one.
func (ha *hostAgent) stepVM(ctx context.Context) error {
	if err := ha.startOrResumeVM(ctx); err != nil {
		return err
	}
	if err := ha.inst.RecordNetStack(ha.boot.spec.NetStack); err != nil {
		slog.Warn("the instance's network stack is not recorded", "err", err)
	}
	return nil
}

func (ha *hostAgent) startOrResumeVM(ctx context.Context) error {
	if ha.boot.resumeFrom == nil {
		return ha.startVM(ctx)
	}
	if err := ha.resumeVM(ctx); err != nil {
		return ha.bootColdInstead(ctx, err.Error())
	}
	return nil
}

// startVM boots the VM and watches its console from the first byte.
func (ha *hostAgent) startVM(ctx context.Context) error {
	console := newConsoleWatch(ha.boot.spec.SerialLog, ha.opts.BootSilence)
	plan, err := ha.withNetStack(ha.boot.plan)
	if err != nil {
		return err
	}
	m, err := ha.boot.driver.Start(ctx, plan)
	if err != nil {
		ha.closeNetStack()
		return err
	}
	ha.watchConsole(console, m)
	if info := m.Info(); info.AccelReason != "" {
		ha.events.Emit("vm", control.EventNote, "", fmt.Sprintf("accel: %s (%s)", info.Accel, info.AccelReason))
	}
	ha.mu.Lock()
	ha.run.machine = m
	ha.mu.Unlock()
	return nil
}

func (ha *hostAgent) undoVM(ctx context.Context) error {
	ha.mu.Lock()
	m := ha.run.machine
	ha.mu.Unlock()
	defer ha.closeNetStack()
	if m == nil {
		return nil
	}
	return m.Stop(ctx, true)
}

func (ha *hostAgent) undoAgent(context.Context) error {
	ha.mu.Lock()
	c := ha.session.client
	ha.session.client = nil
	ha.mu.Unlock()
	if c != nil {
		c.Close()
	}
	return nil
}

func (ha *hostAgent) stepSetup(ctx context.Context) error {
	return ha.onSession(ctx, "setup", func(c *agent.Client) error { return c.Setup(ctx, ha.guestSetup()) })
}

func (ha *hostAgent) stepMounts(ctx context.Context) error {
	err := ha.onSession(ctx, "mounts", func(c *agent.Client) error {
		for _, sh := range ha.boot.spec.Shares {
			req := mountRequest(sh)
			if err := c.Mount(ctx, req); err != nil {
				return fmt.Errorf("mount %s at %s: %w", sh.HostPath, req.Target, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	ha.files.shares.Start()
	// Sync copies go over the shares: a project synced inside the shared
	// home is bound at its deeper path.
	return ha.onSession(ctx, "sync mounts", func(c *agent.Client) error {
		for _, sy := range mounts.Syncs(ha.cfg.Mounts) {
			if err := c.Mount(ctx, filesync.MountRequest(sy)); err != nil {
				return fmt.Errorf("sync mount %s at %s: %w", sy.HostPath, sy.GuestPath, err)
			}
		}
		return nil
	})
}

func (ha *hostAgent) stepRuntime(ctx context.Context) error {
	rt := runtimeFor(ha.cfg.Runtime)
	return ha.onSession(ctx, rt.name, func(c *agent.Client) error { return rt.start(ctx, c) })
}

// bootRedialTimeout bounds the redial after a session lost mid-boot: the
// guest is up, so its agent answers within seconds unless it is gone.
const bootRedialTimeout = 2 * time.Minute

// onSession runs a boot step's guest requests on the current agent
// session. A session that ended under them (a keepalive missed while a
// loaded TCG guest made its data disk, the guest agent restarted) is
// redialled and the requests run once more: each is idempotent, and a
// boot should not fail for a channel hiccup the running instance would
// ride out by reconnecting.
func (ha *hostAgent) onSession(ctx context.Context, step string, requests func(c *agent.Client) error) error {
	ha.mu.Lock()
	c := ha.session.client
	ha.mu.Unlock()
	err := requests(c)
	if err == nil || !ended(c) || ctx.Err() != nil {
		return err
	}
	slog.Warn("the guest agent session ended during a boot step; redialling", "step", step, "err", err)
	ha.events.Emit(step, control.EventNote, "", fmt.Sprintf("the guest agent session ended during %s (%v); redialling", step, err))
	rctx, cancel := context.WithTimeout(ctx, bootRedialTimeout)
	nc, rerr := ha.redial(rctx)
	cancel()
	if rerr != nil {
		return fmt.Errorf("%w (redial after the session ended: %v)", err, rerr)
	}
	c.Close()
	ha.adoptClient(nc)
	return requests(nc)
}

func (ha *hostAgent) stepTunnels(ctx context.Context) error {
	ha.mu.Lock()
	direct := ha.netStackDirect()
	if direct == nil {
		direct = directPathFor(ha.run.machine, ha.session.link.guestAddr)
	}
	ha.mu.Unlock()
	t, err := startTunnels(ctx, ha.inst, ha.cfg, &ha.session.link, direct, ha.hold, ha.yieldToPublished)
	if err != nil {
		return err
	}
	ha.mu.Lock()
	ha.run.tunnels = t
	ha.mu.Unlock()
	return nil
}

// directPathFor is how published TCP ports skip the guest agent on m: its
// own DirectPath (QEMU's hostfwd), or the guest's address where the host
// routes to the VM network (vz's NAT); nil: every port tunnels.
func directPathFor(m driver.Machine, guestAddr func(context.Context) (netip.Addr, error)) forward.DirectPath {
	if d, ok := m.(forward.DirectPath); ok {
		return d
	}
	if r, ok := m.(driver.RoutedGuest); ok && r.GuestRoutable() {
		return forward.AddrPath{Addr: guestAddr}
	}
	return nil
}

func (ha *hostAgent) undoTunnels(context.Context) error {
	ha.mu.Lock()
	t := ha.run.tunnels
	ha.run.tunnels = nil
	ha.mu.Unlock()
	if t != nil {
		t.close()
	}
	return nil
}

func (ha *hostAgent) stepRuntimePing(ctx context.Context) error {
	rt := runtimeFor(ha.cfg.Runtime)
	return rt.ping(ctx, rt.hostSocket(ha.inst), 2*time.Minute)
}

func (ha *hostAgent) prepareDisks(img *images.Image) error {
	fi, err := os.Stat(img.Disk)
	if err != nil {
		return fmt.Errorf("image disk: %w", err)
	}
	rootSize := fi.Size() + rootDiskHeadroom
	if ha.boot.upgradeImage {
		// The old root disk goes only once the new one is whole; the data
		// disk (images, volumes, the containerd store) is not touched.
		if err := images.RemakeDisk(img, ha.inst.DiskPath(), rootSize); err != nil {
			return err
		}
		ha.events.Emit("disks", control.EventNote, "", "--upgrade-image: root disk remade from "+img.Digest+"; the data disk is kept")
		if err := removeIfExists(ha.inst.UpgradeImagePath()); err != nil {
			return err
		}
	} else if err := images.PrepareDisk(img, ha.inst.DiskPath(), rootSize); err != nil {
		return err
	}
	return images.EnsureDataDisk(ha.inst.DataDiskPath(), int64(ha.cfg.DiskGiB)<<30)
}

func (ha *hostAgent) writeBootDisk() error {
	bin, err := agentbin.Binary(ha.cfg.Arch)
	if err != nil {
		return err
	}
	gc := agent.GuestConfig{Channel: channelFor(ha.cfg.VMType)}
	conf, err := json.Marshal(gc)
	if err != nil {
		return err
	}
	return cidata.Write(ha.inst.BootDiskPath(), map[string][]byte{
		"vmdock-agent": bin,
		"agent.json":   conf,
	})
}

// watchConsole follows m's serial console until m exits.
func (ha *hostAgent) watchConsole(w *consoleWatch, m driver.Machine) {
	ha.run.console = w
	stop := make(chan struct{})
	go func() {
		m.Wait()
		close(stop)
	}()
	go w.run(stop)
}

// connectAgent waits for the guest agent's handshake. A resumed guest
// that does not answer soon is given up for a cold boot.
func (ha *hostAgent) connectAgent(ctx context.Context) error {
	if ha.boot.resumed {
		err := ha.dialAgent(ctx, resumeAnswerTimeout)
		if err == nil || ctx.Err() != nil {
			return err
		}
		ha.endResumedVM(ctx)
		if err := ha.bootColdInstead(ctx, fmt.Sprintf("the resumed guest's agent did not answer within %s (%v)", resumeAnswerTimeout, err)); err != nil {
			return err
		}
	}
	return ha.dialAgent(ctx, ha.opts.AgentTimeout)
}

// dialAgent retries until the guest agent answers the handshake; the
// first minute of a TCG boot is kernel and systemd, nothing to talk to.
func (ha *hostAgent) dialAgent(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	exited := make(chan error, 1)
	go func() { exited <- ha.run.machine.Wait() }()
	c, info, err := agent.DialUntilUp(ctx, ha.run.machine.DialAgent, agent.RetryOptions{
		Check:   func() error { return ha.bootAlive(exited) },
		Prepare: ha.prepareClient,
	})
	if errors.Is(err, agent.ErrNotUp) {
		return fmt.Errorf("the guest agent did not answer within %s: %w", timeout, err)
	}
	if err != nil {
		return err
	}
	ha.noteHello(info)
	ha.run.console.bootDone()
	ha.adoptClient(c)
	return nil
}

// bootAlive says why waiting for the guest agent is pointless: the VM
// exited or its console shows a failed boot.
func (ha *hostAgent) bootAlive(exited <-chan error) error {
	select {
	case err := <-exited:
		if perr := ha.run.console.panicked(); perr != nil {
			return perr
		}
		return fmt.Errorf("the VM exited before its agent answered: %v", err)
	case err := <-ha.run.console.Failed():
		return err
	default:
		return nil
	}
}

// prepareClient runs on every new agent session before anything else: a
// guest with host-access connections waiting opens their streams as soon
// as the session is up.
func (ha *hostAgent) prepareClient(c *agent.Client) { c.HandleGuestStreams(ha.serveGuestStream) }

// noteHello logs the guest agent's answer and keeps the boot's first one
// for the boot report.
func (ha *hostAgent) noteHello(info agent.Info) {
	slog.Info("guest agent answered", "version", info.Version, "arch", info.Arch, "kernel", info.Kernel, "uptime", info.Uptime)
	ha.mu.Lock()
	if ha.boot.hello.Version == "" {
		ha.boot.hello = info
	}
	ha.mu.Unlock()
}

// serveGuestStream handles streams the guest opens: connections to the
// host-access address become connections to the host's loopback, and
// connections to the guest's SSH agent socket reach the host's agent.
func (ha *hostAgent) serveGuestStream(req agent.Request, conn net.Conn) {
	defer conn.Close()
	if req.Op == agent.OpSSHAgent {
		ha.relaySSHAgentCapped(conn)
		return
	}
	if req.Op != agent.OpHostDial {
		agent.Reply(conn, fmt.Errorf("op %q is not served by the host", req.Op))
		return
	}
	target, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(req.Port)), 5*time.Second)
	if err != nil {
		slog.Debug("host access dial", "port", req.Port, "err", err)
		agent.Reply(conn, err)
		return
	}
	defer target.Close()
	if err := agent.Reply(conn, nil); err != nil {
		return
	}
	connpipe.Pipe(conn, target)
}

// growsRoot says whether the agent should grow the root file system to
// the disk the host grew. Only a vmdock image's root is the whole disk; a
// bare disk image's root sits in a partition that resize2fs alone cannot
// grow, so it stays the size its image made it.
func (ha *hostAgent) growsRoot() bool {
	return ha.boot.img != nil && ha.boot.img.Kernel != ""
}

func (ha *hostAgent) guestSetup() agent.Setup {
	s := agent.Setup{
		Hostname:         ha.hostname(),
		DNS:              ha.cfg.Network.DNS,
		Env:              ha.cfg.Env,
		TimeUnixNs:       time.Now().UnixNano(),
		GrowRoot:         ha.growsRoot(),
		DataDisk:         driver.ByIDPath(driver.SerialData),
		DataDiskFallback: guestDataDevice,
		Binfmt:           ha.cfg.Binfmt,
		Rosetta:          ha.cfg.VZRosetta,
		HostAccessIP:     ha.guestHostAccessIP(),
		SSHAgent:         ha.sshAgent.sock != "",
	}
	ha.boot.corp.setup(&s)
	ha.addSandboxCA(&s)
	return s
}

// mountRequest asks the guest to mount a resolved share where the config
// put it.
func mountRequest(sh mounts.Share) agent.MountRequest {
	return agent.MountRequest{Type: sh.Type, Tag: sh.Tag, Target: sh.GuestPath, ReadOnly: sh.ReadOnly, Exclude: sh.Exclude, HostPath: sh.HostPath, Cache: sh.Cache}
}

// buildSpec turns the config and the prepared image into the driver's VM spec.
func (ha *hostAgent) buildSpec(img *images.Image) (driver.Spec, error) {
	s := driver.Spec{
		Name:      ha.inst.Name,
		Dir:       ha.inst.Dir,
		Arch:      ha.cfg.Arch,
		CPUs:      ha.cfg.CPUs,
		MemoryMiB: int(ha.cfg.MemoryGiB * 1024),
		Kernel:    img.Kernel,
		Initrd:    img.Initrd,
		Cmdline:   strings.TrimSpace(rootBySerial(img) + " " + os.Getenv(testKernelAppendEnv)),
		Disks: []driver.Disk{
			{Path: ha.inst.DiskPath(), Format: "raw", Serial: driver.SerialRoot},
			{Path: ha.inst.DataDiskPath(), Format: "raw", Serial: driver.SerialData},
			{Path: ha.inst.BootDiskPath(), Format: "raw", ReadOnly: true, CDROM: true, Serial: driver.SerialBoot},
		},
		Network:   ha.cfg.Network.Mode,
		NetStack:  ha.cfg.Network.Stack,
		DiskSync:  ha.cfg.DiskSync,
		Rosetta:   ha.cfg.VZRosetta,
		Accel:     ha.cfg.Accel,
		SerialLog: ha.inst.SerialLogPath(),

		NestedVirtualization: ha.cfg.VZNested,
	}
	s.Shares = mounts.Shares(ha.cfg.Mounts, ha.cfg.MountType)
	if s.NetStack == driver.NetStackGvisor {
		s.NetMAC = usernet.GuestMAC
	}
	if s.CPUs <= 0 || s.MemoryMiB <= 0 {
		return s, errors.New("cpus and memory must be positive")
	}
	return s, nil
}

// rootBySerial is img's kernel command line with root= naming the root
// disk by its serial instead of by attach order, when the image's
// initramfs makes the by-id links: one built with initramfs-tools and
// udev (whose initramfs hook brings the persistent-storage rules), as its
// manifest's packages say. Any other image's command line is kept: with
// no link to wait for, its initramfs would never find the root.
func rootBySerial(img *images.Image) string {
	m := img.Manifest
	if m == nil || m.Packages["udev"] == "" || m.Packages["initramfs-tools"] == "" {
		return img.Cmdline
	}
	fields := strings.Fields(img.Cmdline)
	for i, f := range fields {
		if f == "root="+guestRootDevice {
			fields[i] = "root=" + driver.ByIDPath(driver.SerialRoot)
		}
	}
	return strings.Join(fields, " ")
}

func channelFor(vmType string) string {
	if vmType == driver.TypeVZ {
		return agent.ChannelVsock
	}
	return agent.ChannelVirtioSerial
}

// followGuestLog copies the guest agent's journal into guestagent.log for
// `vmdock logs guest`, for as long as the agent session lives.
func (ha *hostAgent) followGuestLog(c *agent.Client) {
	// Capped: a guest that runs for months must not fill the host's disk.
	f, err := logfile.Open(ha.inst.GuestAgentLogPath(), logfile.MaxSize)
	if err != nil {
		slog.Warn("guest agent log", "err", err)
		return
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-c.Done(); cancel() }()
	ha.mu.Lock()
	first := ha.session.count == 1
	ha.mu.Unlock()
	if first && !ha.waitBootOver(ctx) {
		return
	}
	req := agent.ExecRequest{Argv: guestLogFollower(first)}
	if _, err := c.Exec(ctx, req, nil, f, f, nil); err != nil && ctx.Err() == nil {
		slog.Debug("guest agent log follower ended", "err", err)
	}
}

// waitBootOver waits until the boot is over, ready or failed (false: ctx
// ended). A boot's first journal follower starts then: journalctl reading
// the journal costs seconds of a TCG boot's CPU, and its --no-tail copies
// the lines written meanwhile anyway.
func (ha *hostAgent) waitBootOver(ctx context.Context) bool {
	for {
		ha.mu.Lock()
		phase := ha.run.phase
		ha.mu.Unlock()
		if phase != control.PhaseStarting && phase != "" {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// guestLogFollower is the guest command that follows the agent's journal.
// The agent starts before journald has made its files, and a journalctl
// started then misses every line written when they appear: it waits for
// them first (shell builtins and a short sleep, a few rounds at most). The
// first session of a boot copies the boot's whole agent journal; a later
// one (the agent or this host agent restarted) only its last lines, which
// the log already has.
func guestLogFollower(firstSession bool) []string {
	lines := "-n 10"
	if firstSession {
		lines = "--no-tail"
	}
	script := `i=0; while [ $i -lt 100 ]; do
  for f in /run/log/journal/*/system.journal /var/log/journal/*/system.journal; do [ -e "$f" ] && break 2; done
  sleep 0.2; i=$((i+1))
done
exec journalctl -b -u vmdock-agent -f ` + lines + ` -o short-iso --no-pager`
	return []string{"sh", "-c", script}
}

func (ha *hostAgent) hostname() string {
	if ha.inst.Name == "default" {
		return "vmdock"
	}
	return "vmdock-" + ha.inst.Name
}

func writeSpec(path string, spec driver.Spec) error {
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode VM spec: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write VM spec: %w", err)
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}
