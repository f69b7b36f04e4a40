package qemu

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/driver"
)

func TestDecideAccel(t *testing.T) {
	errNoDev := errors.New("open /dev/kvm: no such file or directory")
	errAbort := errors.New("QEMU exited (signal: aborted): error: failed to set MSR 0x10a to 0x69")
	host := accelFacts{GuestArch: "amd64", HostArch: "amd64", Native: AccelKVM}
	with := func(f func(*accelFacts)) accelFacts { h := host; f(&h); return h }
	tests := []struct {
		name       string
		facts      accelFacts
		probeErr   error
		want       string
		wantReason string // substring; "" means no reason
		wantErr    string
		probed     bool
	}{
		{name: "auto on a working kvm host uses kvm", facts: host, want: AccelKVM, probed: true},
		{name: "empty means auto", facts: with(func(f *accelFacts) { f.Requested = "" }), want: AccelKVM, probed: true},
		{name: "auto with a broken kvm falls back", facts: host, probeErr: errAbort, want: AccelTCG, wantReason: "kvm unusable: QEMU exited (signal: aborted): error: failed to set MSR 0x10a", probed: true},
		{name: "auto without /dev/kvm", facts: with(func(f *accelFacts) { f.DeviceErr = errNoDev }), want: AccelTCG, wantReason: "kvm unavailable: open /dev/kvm"},
		{name: "auto foreign arch is emulated quietly", facts: with(func(f *accelFacts) { f.GuestArch = "arm64" }), want: AccelTCG},
		{name: "auto on an OS without an accelerator", facts: with(func(f *accelFacts) { f.Native = "" }), want: AccelTCG},
		{name: "tcg never probes", facts: with(func(f *accelFacts) { f.Requested = AccelTCG }), want: AccelTCG},
		{name: "explicit kvm works", facts: with(func(f *accelFacts) { f.Requested = AccelKVM }), want: AccelKVM, probed: true},
		{name: "explicit kvm broken quotes QEMU", facts: with(func(f *accelFacts) { f.Requested = AccelKVM }), probeErr: errAbort, wantErr: "accel kvm does not run a guest on this host: QEMU exited (signal: aborted): error: failed to set MSR 0x10a to 0x69", probed: true},
		{name: "explicit kvm without device", facts: with(func(f *accelFacts) { f.Requested = AccelKVM; f.DeviceErr = errNoDev }), wantErr: "accel kvm: open /dev/kvm: no such file or directory"},
		{name: "explicit kvm for a foreign arch", facts: with(func(f *accelFacts) { f.Requested = AccelKVM; f.GuestArch = "arm64" }), wantErr: "can only be emulated"},
		{name: "hvf on linux", facts: with(func(f *accelFacts) { f.Requested = AccelHVF }), wantErr: "accel hvf: not offered by this host; accepted here: auto, tcg, kvm"},
		{name: "unknown value", facts: with(func(f *accelFacts) { f.Requested = "xen" }), wantErr: `accel "xen": accepted values are auto, kvm, hvf and tcg`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probed := false
			got, err := decideAccel(tt.facts, func(accel string) error {
				probed = true
				if accel != tt.facts.Native {
					t.Errorf("probed %s, want %s", accel, tt.facts.Native)
				}
				return tt.probeErr
			})
			if probed != tt.probed {
				t.Errorf("probed = %v, want %v", probed, tt.probed)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Accel != tt.want {
				t.Errorf("accel = %s, want %s", got.Accel, tt.want)
			}
			if (tt.wantReason == "") != (got.Reason == "") || !strings.Contains(got.Reason, tt.wantReason) {
				t.Errorf("reason = %q, want %q", got.Reason, tt.wantReason)
			}
		})
	}
}

func TestComplaintQuotesQEMUNotRegisters(t *testing.T) {
	stderr := newTail(4 << 10)
	stderr.Write([]byte("qemu-system-x86_64: warning: host doesn't support requested feature\n" +
		"KVM internal error. Suberror: 1\nextra data[0]: 0x0000000000000000\n" +
		"RAX=0000000000000000 RBX=0000000000000000\nEIP=0000fff0 EFL=00000002\n"))
	if got := complaint(stderr.lines(40)); got != "KVM internal error. Suberror: 1" {
		t.Errorf("complaint = %q", got)
	}
	stderr = newTail(4 << 10)
	stderr.Write([]byte("qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69\n" +
		"qemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed.\n"))
	if got := complaint(stderr.lines(40)); !strings.HasPrefix(got, "error: failed to set MSR 0x10a to 0x69; ../../target/i386/kvm/kvm.c") {
		t.Errorf("complaint = %q", got)
	}
	if got := complaint("just one line"); got != "just one line" {
		t.Errorf("complaint = %q", got)
	}
}

// brokenKVMWrapper writes a qemu-system-x86_64 stand-in that behaves like
// this project's nested-KVM hosts: with -accel kvm it prints QEMU's MSR
// complaint and aborts; otherwise it runs the real QEMU. With probeOK, the
// probe boot (the only one without -name) runs under tcg instead, so only
// the real boot dies. Every kvm start is counted in dir/kvm-starts.
func brokenKVMWrapper(t *testing.T, real string, probeOK bool) (string, string) {
	t.Helper()
	dir := t.TempDir()
	count := filepath.Join(dir, "kvm-starts")
	script := `#!/bin/bash
kvm=0; named=0
for a in "$@"; do
  [ "$a" = kvm ] && kvm=1
  [ "$a" = -name ] && named=1
done
if [ $kvm = 1 ]; then
  echo start >> '` + count + `'
  if [ $named = 0 ] && [ ` + map[bool]string{true: "1", false: "0"}[probeOK] + ` = 1 ]; then
    args=(); for a in "$@"; do case "$a" in kvm) args+=(tcg) ;; host) args+=(max) ;; *) args+=("$a") ;; esac; done
    exec '` + real + `' "${args[@]}"
  fi
  echo "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69" >&2
  echo "qemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion failed." >&2
  kill -ABRT $$
fi
exec '` + real + `' "$@"
`
	bin := filepath.Join(dir, "qemu-system-x86_64")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, count
}

func kvmStarts(t *testing.T, count string) int {
	b, err := os.ReadFile(count)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "start")
}

// bootInfo starts spec with d, reads what the machine reports and stops it.
func bootInfo(t *testing.T, d *Driver, spec driver.Spec) driver.MachineInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mm, err := prepareAndStart(ctx, d, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	info := mm.Info()
	mm.Stop(context.Background(), true)
	return info
}

// workingDevice pretends /dev/kvm opens, whatever this host has.
func workingDevice() (string, error) { return AccelKVM, nil }

func TestAutoFallsBackToTCGWhenKVMAborts(t *testing.T) {
	real := needQEMU(t)
	bin, count := brokenKVMWrapper(t, real, false)
	cache := t.TempDir()
	d := New(Options{Binary: bin, CacheDir: cache, pausedBIOS: true, accelDevice: workingDevice})
	for boot := 1; boot <= 2; boot++ {
		info := bootInfo(t, d, pausedSpec(t, shortDir(t)))
		if info.Accel != AccelTCG || !strings.Contains(info.AccelReason, "kvm unusable:") || !strings.Contains(info.AccelReason, "failed to set MSR 0x10a") {
			t.Errorf("boot %d: Info = %+v; want tcg with QEMU's reason", boot, info)
		}
	}
	if n := kvmStarts(t, count); n != 1 {
		t.Errorf("kvm was tried %d times over two starts; want 1 (the cached probe)", n)
	}
	if files, _ := filepath.Glob(filepath.Join(cache, "accel-*.json")); len(files) != 1 {
		t.Errorf("verdict cache files = %v, want one", files)
	}
}

func TestExplicitKVMFailsQuotingQEMU(t *testing.T) {
	real := needQEMU(t)
	bin, _ := brokenKVMWrapper(t, real, false)
	d := New(Options{Binary: bin, pausedBIOS: true, accelDevice: workingDevice})
	spec := pausedSpec(t, shortDir(t))
	spec.Accel = AccelKVM
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mm, err := prepareAndStart(ctx, d, spec)
	if err == nil {
		mm.Stop(context.Background(), true)
		t.Fatalf("Start with accel kvm on a broken kvm succeeded with %+v", mm.Info())
	}
	if !strings.Contains(err.Error(), "accel kvm does not run a guest") || !strings.Contains(err.Error(), "failed to set MSR 0x10a to 0x69") {
		t.Errorf("err = %v", err)
	}
	if _, err := os.Stat(QMPSocketPath(spec.Dir)); err == nil {
		t.Error("a qmp socket was left: something was started")
	}
}

func TestRealBootFailureUnderKVMRetriesWithTCG(t *testing.T) {
	real := needQEMU(t)
	bin, count := brokenKVMWrapper(t, real, true)
	cache := t.TempDir()
	d := New(Options{Binary: bin, CacheDir: cache, pausedBIOS: true, accelDevice: workingDevice})
	info := bootInfo(t, d, pausedSpec(t, shortDir(t)))
	if info.Accel != AccelTCG || !strings.Contains(info.AccelReason, "failed to set MSR") {
		t.Errorf("Info = %+v; want tcg after the real boot died under kvm", info)
	}
	if n := kvmStarts(t, count); n != 2 {
		t.Errorf("kvm starts = %d; want 2 (probe passed, real boot died)", n)
	}
	// The failure is remembered: the next start goes straight to tcg.
	info = bootInfo(t, d, pausedSpec(t, shortDir(t)))
	if n := kvmStarts(t, count); n != 2 || info.Accel != AccelTCG {
		t.Errorf("second start: kvm starts = %d, Info = %+v; want no new kvm try, tcg", n, info)
	}
}

func TestProbeRunsTheRealQEMU(t *testing.T) {
	real := needQEMU(t)
	// tcg always runs the firmware: the probe itself must say so.
	if err := probeAccel(context.Background(), real, driver.ArchAMD64, AccelTCG, probeBoot{}); err != nil {
		t.Fatalf("tcg probe: %v", err)
	}
}

func TestAutoWithoutKVMDeviceRunsTCGAndSaysWhy(t *testing.T) {
	needQEMU(t)
	missing := func() (string, error) {
		return AccelKVM, &os.PathError{Op: "open", Path: "/dev/kvm", Err: os.ErrNotExist}
	}
	info := bootInfo(t, New(Options{pausedBIOS: true, accelDevice: missing}), pausedSpec(t, shortDir(t)))
	if info.Accel != AccelTCG || info.AccelReason != "kvm unavailable: open /dev/kvm: file does not exist" {
		t.Errorf("Info = %+v", info)
	}
}

// kernelFailsUnderKVMWrapper is the nested kvm_pvm this project met: QEMU
// runs the firmware under kvm (the wrapper runs it under tcg) but the
// guest kernel's (or OVMF's) first instructions stop it with an internal
// error.
func kernelFailsUnderKVMWrapper(t *testing.T, real string) string {
	t.Helper()
	script := `#!/bin/bash
kvm=0; kernel=0
for a in "$@"; do
  [ "$a" = kvm ] && kvm=1
  [ "$a" = -kernel ] && kernel=1
  case "$a" in if=pflash*) kernel=1 ;; esac
done
if [ $kvm = 1 ] && [ $kernel = 1 ]; then
  echo "KVM internal error. Suberror: 1" >&2
  exit 1
fi
args=(); for a in "$@"; do case "$a" in kvm) args+=(tcg) ;; host) args+=(max) ;; *) args+=("$a") ;; esac; done
exec '` + real + `' "${args[@]}"
`
	bin := filepath.Join(t.TempDir(), "qemu-system-x86_64")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestProbeBootsTheGuestKernel(t *testing.T) {
	real := needQEMU(t)
	bin := kernelFailsUnderKVMWrapper(t, real)
	d := New(Options{Binary: bin, CacheDir: t.TempDir(), accelDevice: workingDevice})
	out, err := exec.Command(real, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseVersion(string(out))
	if err != nil {
		t.Fatal(err)
	}
	spec := driver.Spec{Arch: driver.ArchAMD64, Kernel: filepath.Join(t.TempDir(), "vmlinuz")}
	choice, err := d.chooseAccel(context.Background(), spec, bin, HostEnv{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	if choice.Accel != AccelTCG || !strings.Contains(choice.Reason, "KVM internal error") {
		t.Errorf("choice = %+v; want tcg quoting the kernel's failure under kvm", choice)
	}
	// An EFI boot probes its UEFI firmware.
	spec.Kernel = ""
	efi := HostEnv{Version: v, Firmware: Firmware{Code: filepath.Join(t.TempDir(), "OVMF_CODE.fd")}}
	if choice, err := d.chooseAccel(context.Background(), spec, bin, efi); err != nil || choice.Accel != AccelTCG {
		t.Errorf("UEFI probe: %+v, %v; want tcg", choice, err)
	}
	// With neither, the machine's own firmware is all there is to run.
	if choice, err := d.chooseAccel(context.Background(), spec, bin, HostEnv{Version: v}); err != nil || choice.Accel != AccelKVM {
		t.Errorf("firmware probe: %+v, %v; want kvm", choice, err)
	}
}
