package qemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/vm/driver"
)

// Accelerators QEMU can use; MachineInfo.Accel reports one of them.
const (
	AccelKVM = driver.AccelKVM
	AccelHVF = driver.AccelHVF
	AccelTCG = driver.AccelTCG
)

// hostArch is the GOARCH-style arch of this host; hardware acceleration is
// only possible when the guest arch matches it.
func hostArch() string { return runtime.GOARCH }

// accelChoice is the accelerator a boot runs under and, when that is not
// the fastest this host could have offered, why.
type accelChoice struct {
	Accel  string
	Reason string
}

// accelFacts is what the accelerator decision depends on, gathered apart
// from it so the decision itself is a pure function.
type accelFacts struct {
	Requested string // driver.Accel*; empty means auto
	GuestArch string
	HostArch  string
	Native    string // the hardware accelerator this OS has (kvm, hvf); empty: none
	DeviceErr error  // why Native cannot even be opened
}

// errAccelInconclusive marks a probe that could not tell (QEMU too slow to
// answer on a loaded host): auto then takes tcg for this boot without
// caching a verdict.
var errAccelInconclusive = errors.New("accelerator probe inconclusive")

// decideAccel picks the accelerator. auto never trusts that a device opens:
// probe must have run a guest under it. An explicit kvm or hvf that cannot
// work is an error quoting why, never a silent fall back.
func decideAccel(f accelFacts, probe func(accel string) error) (accelChoice, error) {
	req := f.Requested
	if req == "" {
		req = driver.AccelAuto
	}
	switch req {
	case AccelTCG:
		return accelChoice{Accel: AccelTCG}, nil
	case driver.AccelAuto:
		if f.Native == "" || f.GuestArch != f.HostArch {
			// Emulation is the only way: nothing to explain.
			return accelChoice{Accel: AccelTCG}, nil
		}
		if f.DeviceErr != nil {
			return accelChoice{Accel: AccelTCG, Reason: fmt.Sprintf("%s unavailable: %v", f.Native, f.DeviceErr)}, nil
		}
		if err := probe(f.Native); err != nil {
			return accelChoice{Accel: AccelTCG, Reason: fmt.Sprintf("%s unusable: %v", f.Native, err)}, nil
		}
		return accelChoice{Accel: f.Native}, nil
	case AccelKVM, AccelHVF:
		if f.Native != req {
			return accelChoice{}, fmt.Errorf("accel %s: not offered by this host; accepted here: auto, tcg%s", req, orNative(f.Native))
		}
		if f.GuestArch != f.HostArch {
			return accelChoice{}, fmt.Errorf("accel %s: a %s guest on a %s host can only be emulated; use accel auto or tcg", req, f.GuestArch, f.HostArch)
		}
		if f.DeviceErr != nil {
			return accelChoice{}, fmt.Errorf("accel %s: %v; use accel auto (falls back to tcg) or tcg", req, f.DeviceErr)
		}
		if err := probe(req); err != nil {
			return accelChoice{}, fmt.Errorf("accel %s does not run a guest on this host: %v; use accel auto (falls back to tcg) or tcg", req, err)
		}
		return accelChoice{Accel: req}, nil
	}
	return accelChoice{}, fmt.Errorf("accel %q: accepted values are auto, kvm, hvf and tcg", f.Requested)
}

func orNative(native string) string {
	if native == "" {
		return ""
	}
	return ", " + native
}

// hostAccelFacts gathers the facts about this host for spec.
func (d *Driver) hostAccelFacts(spec driver.Spec) accelFacts {
	native, devErr := hostAccel()
	if d.opts.accelDevice != nil {
		native, devErr = d.opts.accelDevice()
	}
	return accelFacts{Requested: spec.Accel, GuestArch: spec.Arch, HostArch: hostArch(), Native: native, DeviceErr: devErr}
}

// chooseAccel decides with a real probe boot of what the guest boots
// first, cached per host.
func (d *Driver) chooseAccel(ctx context.Context, spec driver.Spec, bin string, env HostEnv) (accelChoice, error) {
	boot := probeBoot{Kernel: spec.Kernel, Firmware: env.Firmware.Code}
	return decideAccel(d.hostAccelFacts(spec), func(accel string) error {
		return d.probeCached(ctx, bin, env.Version, spec.Arch, accel, boot)
	})
}

// probeBoot is what the probe runs under the accelerator: the guest's
// kernel (direct boot), its UEFI firmware, or with neither the machine's
// own firmware. A nested kvm_pvm ran SeaBIOS and then stopped both a
// Linux kernel and OVMF with an internal error, so the probe runs what
// the guest will.
type probeBoot struct {
	Kernel   string
	Firmware string // UEFI code image
}

func (b probeBoot) args() []string {
	switch {
	case b.Kernel != "":
		// No initrd: the kernel panics for want of a root and QEMU exits.
		return []string{"-kernel", b.Kernel, "-append", "panic=-1 loglevel=1"}
	case b.Firmware != "":
		return []string{"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + esc(b.Firmware)}
	}
	return nil
}

// guessAccel is chooseAccel without the probe, for Prepare, which must
// not start anything: it still rejects what can never work.
func (d *Driver) guessAccel(spec driver.Spec) (accelChoice, error) {
	return decideAccel(d.hostAccelFacts(spec), func(string) error { return nil })
}

// accelVerdict is one cached probe result. The key holds everything that
// can change the answer: kernel, QEMU binary and version, arch, accel.
type accelVerdict struct {
	Key     string    `json:"key"`
	OK      bool      `json:"ok"`
	Message string    `json:"message,omitempty"`
	Checked time.Time `json:"checked"`
}

// probeKind names what the probe boots, so verdicts of an older, weaker
// probe (firmware only, which a nested kvm_pvm passed before failing the
// guest kernel's first instructions) are not trusted.
const probeKind = "probe3"

func verdictKey(bin string, v Version, arch, accel string, boot probeBoot) string {
	return strings.Join([]string{kernelRelease(), bin, "qemu " + v.String(), arch, accel, probeKind, boot.Kernel, boot.Firmware}, "|")
}

func (d *Driver) verdictPath(key string) string {
	if d.opts.CacheDir == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(d.opts.CacheDir, "accel-"+hex.EncodeToString(sum[:8])+".json")
}

// probeCached returns the cached verdict for this host, or probes and
// caches a conclusive one.
func (d *Driver) probeCached(ctx context.Context, bin string, v Version, arch, accel string, boot probeBoot) error {
	key := verdictKey(bin, v, arch, accel, boot)
	path := d.verdictPath(key)
	if path != "" {
		var cached accelVerdict
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &cached) == nil && cached.Key == key {
			d.log.Debug("accelerator verdict from cache", "accel", accel, "ok", cached.OK, "file", path)
			if cached.OK {
				return nil
			}
			return errors.New(cached.Message)
		}
	}
	start := time.Now()
	err := probeAccel(ctx, bin, arch, accel, boot)
	d.log.Info("accelerator probe", "accel", accel, "ok", err == nil, "err", err, "took", time.Since(start).Round(time.Millisecond))
	if path == "" || errors.Is(err, errAccelInconclusive) {
		return err
	}
	verdict := accelVerdict{Key: key, OK: err == nil, Checked: time.Now().UTC()}
	if err != nil {
		verdict.Message = err.Error()
	}
	if werr := writeVerdict(path, verdict); werr != nil {
		d.log.Warn("cache accelerator verdict", "err", werr)
	}
	return err
}

func writeVerdict(path string, v accelVerdict) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}

// Probe timing: how long QEMU gets to come up, and how long the probe
// guest must keep running to count as running.
const (
	probeStartTimeout = 15 * time.Second
	probeRunFor       = 3 * time.Second
)

// probeAccel boots boot under accel with the same -accel/-cpu arguments
// the real boot uses, and watches what QEMU does: exiting with an error
// (an assertion such as "failed to set MSR 0x10a") or stopping with
// internal-error means the accelerator does not run guests here.
func probeAccel(ctx context.Context, bin, arch, accel string, boot probeBoot) error {
	qarch, err := qemuArch(arch)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "vmdock-probe")
	if err != nil {
		return fmt.Errorf("probe folder: %w", err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "qmp.sock")
	args := append([]string{"-machine", baseMachine(qarch)}, accelArgs(accel, qarch)...)
	// 256 MiB: with less, a kernel gives up before the instructions a
	// nested kvm_pvm fails on (64 MiB passed a kernel whose real boot died).
	args = append(args,
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-m", "256",
		"-chardev", "socket,id=qmp,path="+esc(sock)+",server=on,wait=off",
		"-mon", "chardev=qmp,mode=control",
	)
	p := &probeRun{boot: boot, tail: newTail(4 << 10), exited: make(chan error, 1)}
	cmd := exec.Command(bin, append(args, boot.args()...)...)
	cmd.Stderr = p.tail
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { p.exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-p.exited
	}()
	ctx, cancel := context.WithTimeout(ctx, probeStartTimeout)
	defer cancel()
	q, err := p.dial(ctx, sock)
	if q == nil {
		return err
	}
	defer q.Close()
	return p.watch(ctx, q)
}

// probeRun is one probe QEMU as it runs.
type probeRun struct {
	boot   probeBoot
	tail   *tailBuffer
	exited chan error
}

// ended is the verdict on a QEMU that exited with err: a kernel probe
// ends well by itself (the kernel panics for want of a root, and
// -no-reboot turns its reboot into a clean exit); anything else failed.
func (p *probeRun) ended(err error) error {
	p.exited <- err
	if err == nil && p.boot.Kernel != "" {
		return nil
	}
	return p.fail(fmt.Sprintf("QEMU exited (%v)", err))
}

func (p *probeRun) fail(what string) error {
	if msg := complaint(p.tail.lines(40)); msg != "" {
		return fmt.Errorf("%s: %s", what, msg)
	}
	return errors.New(what)
}

// dial waits for QMP; a nil qmp comes with the verdict (nil: passed).
func (p *probeRun) dial(ctx context.Context, sock string) (*qmp, error) {
	for {
		select {
		case err := <-p.exited:
			return nil, p.ended(err)
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: QEMU did not answer within %s", errAccelInconclusive, probeStartTimeout)
		case <-time.After(50 * time.Millisecond):
		}
		if q, _ := dialQMP(ctx, sock); q != nil {
			return q, nil
		}
	}
}

// watch asks QEMU for the guest's state until probeRunFor has passed.
func (p *probeRun) watch(ctx context.Context, q *qmp) error {
	deadline := time.Now().Add(probeRunFor)
	for {
		var st struct {
			Status string `json:"status"`
		}
		err := q.execute(ctx, "query-status", nil, &st)
		select {
		case werr := <-p.exited:
			return p.ended(werr)
		default:
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errAccelInconclusive, err)
		}
		if st.Status != "running" {
			return p.fail("QEMU stopped the guest with status " + st.Status)
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// complaint picks QEMU's own error lines out of its stderr ("; "-joined
// lines), skipping register dumps, so a one-line message can quote it.
func complaint(lines string) string {
	var picked []string
	for _, l := range strings.Split(lines, "; ") {
		// "qemu-system-x86_64: error: ..." says nothing the reader needs.
		if name, rest, ok := strings.Cut(l, ": "); ok && strings.HasPrefix(name, "qemu-system-") {
			l = rest
		}
		low := strings.ToLower(l)
		if strings.Contains(low, "error") || strings.Contains(low, "assertion") || strings.Contains(low, "failed") {
			picked = append(picked, l)
		}
	}
	if len(picked) == 0 {
		all := strings.Split(lines, "; ")
		last := all[len(all)-1]
		if name, rest, ok := strings.Cut(last, ": "); ok && strings.HasPrefix(name, "qemu-system-") {
			last = rest
		}
		picked = []string{last}
	}
	if len(picked) > 2 {
		picked = picked[:2]
	}
	msg := strings.Join(picked, "; ")
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	return msg
}

// forgetAccel records that accel failed a real boot, so the next start
// does not try it again on this host.
func (d *Driver) forgetAccel(bin string, v Version, arch, accel string, boot probeBoot, cause error) {
	key := verdictKey(bin, v, arch, accel, boot)
	if path := d.verdictPath(key); path != "" {
		if err := writeVerdict(path, accelVerdict{Key: key, Message: cause.Error(), Checked: time.Now().UTC()}); err != nil {
			d.log.Warn("cache accelerator verdict", "err", err)
		}
	}
}
