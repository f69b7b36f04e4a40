package qemu

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
)

// values reports every value that follows flag in argv.
func values(argv []string, flag string) []string {
	var out []string
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == flag {
			out = append(out, argv[i+1])
		}
	}
	return out
}

func baseSpec() driver.Spec {
	return driver.Spec{
		Name: "default", Dir: "/home/u/.vmdock/default", Arch: driver.ArchAMD64,
		CPUs: 2, MemoryMiB: 2048,
		Kernel: "/img/vmlinuz", Initrd: "/img/initrd.img", Cmdline: "root=/dev/vda console=ttyS0",
		Disks: []driver.Disk{
			{Path: "/home/u/.vmdock/default/disk.raw", Format: "raw"},
			{Path: "/home/u/.vmdock/default/boot.iso", CDROM: true},
			{Path: "/home/u/.vmdock/default/data.raw", Format: "raw"},
		},
		Shares:    []mounts.Share{{Tag: "m0", HostPath: "/home/u", Type: mounts.Type9p}, {Tag: "m1", HostPath: "/opt/ro", ReadOnly: true, Type: mounts.Type9p}},
		Network:   driver.NetworkIsolated,
		DiskSync:  driver.DiskSyncFsync,
		SerialLog: "/home/u/.vmdock/default/serial.log",
	}
}

var tcgEnv = HostEnv{Accel: AccelTCG, Version: Version{7, 2, 22}}

func TestArgs(t *testing.T) {
	const dir = "/home/u/.vmdock/default"
	tests := []struct {
		name    string
		mutate  func(*driver.Spec)
		env     HostEnv
		want    map[string][]string // flag -> values that must all be present
		absent  []string            // flags that must not appear
		exclude []string            // substrings no argument may contain
	}{
		{
			name: "amd64 direct kernel boot under TCG with 9p",
			env:  tcgEnv,
			want: map[string][]string{
				"-machine": {"q35"},
				"-accel":   {"tcg,thread=single,tb-size=128"},
				"-cpu":     {"max"},
				"-display": {"none"},
				"-vga":     {"none"},
				"-smp":     {"1"}, // the spec asks for 2; TCG gets one (GuestCPUs)
				"-m":       {"2048"},
				"-kernel":  {"/img/vmlinuz"},
				"-initrd":  {"/img/initrd.img"},
				"-append":  {"root=/dev/vda mitigations=off loglevel=6 console=ttyS0"},
				"-pidfile": {dir + "/qemu.pid"},
				"-mon":     {"chardev=qmp,mode=control"},
				"-serial":  {"chardev:serial0"},
				"-netdev":  {"user,id=net0,restrict=on"},
				"-drive": {
					"if=none,id=disk0,file=" + dir + "/disk.raw,format=raw,cache=writeback,discard=unmap,detect-zeroes=unmap",
					"if=none,id=disk1,file=" + dir + "/boot.iso,format=raw,readonly=on,cache=writeback",
					"if=none,id=disk2,file=" + dir + "/data.raw,format=raw,cache=writeback,discard=unmap,detect-zeroes=unmap",
				},
				"-device": {
					"virtio-blk-pci,drive=disk0", "virtio-blk-pci,drive=disk1", "virtio-blk-pci,drive=disk2",
					"virtio-net-pci,netdev=net0", "virtio-serial-pci,id=vser0",
					"virtserialport,bus=vser0.0,chardev=agent,name=org.vmdock.agent",
				},
				"-chardev": {
					"socket,id=qmp,path=" + dir + "/qmp.sock,server=on,wait=off",
					"socket,id=agent,path=" + dir + "/agent.sock,server=on,wait=off",
					"file,id=serial0,path=" + dir + "/serial.log,append=on",
				},
				"-virtfs": {
					"local,path=/home/u,mount_tag=m0,security_model=none,multidevs=remap,id=fs0",
					"local,path=/opt/ro,mount_tag=m1,security_model=none,multidevs=remap,id=fs1,readonly=on",
				},
			},
			absent:  []string{"-S", "-bios"},
			exclude: []string{"pflash", "mapped-xattr", "memory-backend", "bootindex"},
		},
		{
			name: "arm64 EFI boot under KVM",
			mutate: func(s *driver.Spec) {
				s.Arch = driver.ArchARM64
				s.Kernel, s.Initrd, s.Cmdline = "", "", ""
			},
			env: HostEnv{Accel: AccelKVM, Version: Version{8, 2, 0}, Firmware: Firmware{Code: "/usr/share/AAVMF/AAVMF_CODE.fd"}},
			want: map[string][]string{
				"-machine": {"virt"},
				"-accel":   {"kvm"},
				"-cpu":     {"host"},
				"-drive": {
					"if=pflash,format=raw,unit=0,readonly=on,file=/usr/share/AAVMF/AAVMF_CODE.fd",
					"if=pflash,format=raw,unit=1,file=" + dir + "/efi-vars.fd",
				},
				// Only the first real disk is the boot disk; the ISO is not.
				"-device": {"virtio-blk-pci,drive=disk0,bootindex=0", "virtio-blk-pci,drive=disk1", "virtio-blk-pci,drive=disk2"},
			},
			absent: []string{"-vga", "-kernel", "-initrd", "-append"},
		},
		{
			name:   "foreign arm64 under TCG uses virt and -cpu max with the cheap pauth",
			mutate: func(s *driver.Spec) { s.Arch = driver.ArchARM64 },
			env:    tcgEnv,
			want:   map[string][]string{"-machine": {"virt"}, "-accel": {"tcg,thread=single,tb-size=128"}, "-cpu": {"max,pauth-impdef=on"}, "-append": {"root=/dev/vda mitigations=off loglevel=6 console=ttyAMA0"}},
			absent: []string{"-vga"},
		},
		{
			name:   "virtiofs shares use vhost-user-fs and shared memfd RAM",
			mutate: func(s *driver.Spec) { allShares(s, mounts.TypeVirtiofs) },
			env:    HostEnv{Accel: AccelTCG, Virtiofsd: Virtiofsd{Path: "/usr/libexec/virtiofsd", Rust: true}},
			want: map[string][]string{
				"-machine": {"q35,memory-backend=mem"},
				"-object":  {"memory-backend-memfd,id=mem,size=2048M,share=on"},
				"-chardev": {"socket,id=vfs0,path=" + dir + "/virtiofs-0.sock", "socket,id=vfs1,path=" + dir + "/virtiofs-1.sock"},
				"-device":  {"vhost-user-fs-pci,chardev=vfs0,tag=m0", "vhost-user-fs-pci,chardev=vfs1,tag=m1"},
			},
			absent: []string{"-virtfs"},
		},
		{
			name:    "disk sync none drops flushes",
			mutate:  func(s *driver.Spec) { s.DiskSync = driver.DiskSyncNone },
			env:     tcgEnv,
			want:    map[string][]string{"-drive": {"if=none,id=disk0,file=" + dir + "/disk.raw,format=raw,cache=unsafe,discard=unmap,detect-zeroes=unmap"}},
			exclude: []string{"cache=writeback"},
		},
		{
			name:   "user network is not restricted",
			mutate: func(s *driver.Spec) { s.Network = driver.NetworkUser },
			env:    tcgEnv,
			want:   map[string][]string{"-netdev": {"user,id=net0"}},
		},
		{
			name: "commas in paths and tags are escaped",
			mutate: func(s *driver.Spec) {
				s.Dir = "/tmp/a,b"
				s.Disks = []driver.Disk{{Path: "/tmp/a,b/disk.raw", Format: "qcow2"}}
				s.Shares = []mounts.Share{{Tag: "t", HostPath: "/src/x,y", Type: mounts.Type9p}}
				s.SerialLog = ""
			},
			env: tcgEnv,
			want: map[string][]string{
				"-drive":   {"if=none,id=disk0,file=/tmp/a,,b/disk.raw,format=qcow2,cache=writeback,discard=unmap,detect-zeroes=unmap"},
				"-chardev": {"socket,id=qmp,path=/tmp/a,,b/qmp.sock,server=on,wait=off"},
				"-virtfs":  {"local,path=/src/x,,y,mount_tag=t,security_model=none,multidevs=remap,id=fs0"},
				"-pidfile": {"/tmp/a,b/qemu.pid"}, // a plain argument, not an option list
			},
			absent: []string{"-serial"},
		},
		{
			name:   "paused BIOS test mode boots nothing",
			mutate: func(s *driver.Spec) { s.Kernel = "" },
			env:    HostEnv{Accel: AccelTCG, pausedBIOS: true},
			want:   map[string][]string{},
			absent: []string{"-kernel", "-bios"},
			// -S is checked below as a bare flag.
			exclude: []string{"pflash"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := baseSpec()
			if tt.mutate != nil {
				tt.mutate(&spec)
			}
			argv, err := Args(spec, tt.env)
			if err != nil {
				t.Fatalf("Args: %v", err)
			}
			for flag, vals := range tt.want {
				got := values(argv, flag)
				for _, v := range vals {
					if !slices.Contains(got, v) {
						t.Errorf("%s %q missing; have %q", flag, v, got)
					}
				}
			}
			for _, flag := range tt.absent {
				if slices.Contains(argv, flag) {
					t.Errorf("unexpected %s in %q", flag, argv)
				}
			}
			for _, sub := range tt.exclude {
				for _, a := range argv {
					if strings.Contains(a, sub) {
						t.Errorf("unexpected %q in argument %q", sub, a)
					}
				}
			}
			for _, f := range []string{"-nodefaults", "-no-reboot"} {
				if !slices.Contains(argv, f) {
					t.Errorf("%s missing", f)
				}
			}
			if got := slices.Contains(argv, "-S"); got != tt.env.pausedBIOS {
				t.Errorf("-S present = %v, want %v", got, tt.env.pausedBIOS)
			}
			// Disks must appear in Spec order.
			var order []string
			for _, d := range values(argv, "-drive") {
				if strings.HasPrefix(d, "if=none,") {
					order = append(order, strings.Split(d, ",")[1])
				}
			}
			for i := 1; i < len(order); i++ {
				if order[i-1] > order[i] {
					t.Errorf("disks out of order: %q", order)
				}
			}
		})
	}
}

func TestArgsErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*driver.Spec)
		env    HostEnv
		want   string // substring of the error
	}{
		{"bad arch", func(s *driver.Spec) { s.Arch = "riscv64" }, tcgEnv, `arch "riscv64": accepted values are amd64 and arm64`},
		{"no cpus", func(s *driver.Spec) { s.CPUs = 0 }, tcgEnv, "cpus 0"},
		{"tiny memory", func(s *driver.Spec) { s.MemoryMiB = 64 }, tcgEnv, "memory 64 MiB"},
		{"bad disk sync", func(s *driver.Spec) { s.DiskSync = "sometimes" }, tcgEnv, `disk sync "sometimes": accepted values are full, fsync and none`},
		{"bad network", func(s *driver.Spec) { s.Network = "bridged" }, tcgEnv, `network "bridged"`},
		{"bad mount type", func(s *driver.Spec) { s.Shares[0].Type = "nfs" }, tcgEnv, `mount type "nfs"`},
		{"share without mount type", func(s *driver.Spec) { s.Shares[1].Type = "" }, tcgEnv, `share /opt/ro: mount type ""`},
		{"duplicate tag", func(s *driver.Spec) { s.Shares[1].Tag = "m0" }, tcgEnv, `share tag "m0" is used twice`},
		{"bad disk format", func(s *driver.Spec) { s.Disks[0].Format = "vmdk" }, tcgEnv, `format "vmdk": accepted values are raw and qcow2`},
		{"missing disk format", func(s *driver.Spec) { s.Disks[0].Format = "" }, tcgEnv, "has no format"},
		{"bad accel", nil, HostEnv{Accel: "whpx"}, `accelerator "whpx"`},
		{"old qemu", nil, HostEnv{Accel: AccelTCG, Version: Version{5, 2, 0}}, "qemu 5.2.0 is too old"},
		{"no x86 firmware", func(s *driver.Spec) { s.Kernel = "" }, tcgEnv, "install the ovmf package"},
		{"no arm64 firmware", func(s *driver.Spec) { s.Kernel, s.Arch = "", driver.ArchARM64 }, tcgEnv, "install the qemu-efi-aarch64 package"},
		{"virtiofs without daemon", func(s *driver.Spec) { allShares(s, mounts.TypeVirtiofs) }, tcgEnv, "needs virtiofsd"},
		{"no dir", func(s *driver.Spec) { s.Dir = "" }, tcgEnv, "no instance folder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := baseSpec()
			if tt.mutate != nil {
				tt.mutate(&spec)
			}
			_, err := Args(spec, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Args error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in      string
		want    Version
		wantErr bool
	}{
		{"QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\nCopyright", Version{7, 2, 22}, false},
		{"QEMU emulator version 9.1.0\n", Version{9, 1, 0}, false},
		{"QEMU emulator version 8.2.2 (qemu-8.2.2-1.fc40)", Version{8, 2, 2}, false},
		{"QEMU emulator version 10.0.0-rc1", Version{10, 0, 0}, false},
		{"QEMU emulator version 6.2", Version{6, 2, 0}, false},
		{"something else", Version{}, true},
		{"version x.y", Version{}, true},
	}
	for _, tt := range tests {
		got, err := ParseVersion(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestBinaryName(t *testing.T) {
	for arch, want := range map[string]string{driver.ArchAMD64: "qemu-system-x86_64", driver.ArchARM64: "qemu-system-aarch64"} {
		if got, err := BinaryName(arch); err != nil || got != want {
			t.Errorf("BinaryName(%s) = %q, %v; want %q", arch, got, err, want)
		}
	}
	if _, err := BinaryName("386"); err == nil {
		t.Error("BinaryName(386) did not fail")
	}
}

func TestTCGKernelArgs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"root=/dev/vda rw apparmor=0", "root=/dev/vda rw apparmor=0 mitigations=off loglevel=6"},
		{"", "mitigations=off loglevel=6"},
		// The image's or a test's own settings win over ours.
		{"root=/dev/vda mitigations=auto loglevel=8", "root=/dev/vda mitigations=auto loglevel=8"},
		{"root=/dev/vda loglevel=3", "root=/dev/vda loglevel=3 mitigations=off"},
		// quiet is quieter than loglevel=6: raising it again would undo it.
		{"root=/dev/vda quiet", "root=/dev/vda quiet mitigations=off"},
		// A value that only starts like a key is not that key.
		{"root=/dev/vda rdinit=/x loglevelx=1", "root=/dev/vda rdinit=/x loglevelx=1 mitigations=off loglevel=6"},
	} {
		if got := withTCGKernelArgs(tc.in); got != tc.want {
			t.Errorf("withTCGKernelArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSerialConsolePerArch(t *testing.T) {
	in := "root=/dev/vda rw console=ttyAMA0 console=hvc0 apparmor=0"
	for arch, want := range map[string]string{
		"x86_64":  "root=/dev/vda rw apparmor=0 console=ttyS0",
		"aarch64": "root=/dev/vda rw apparmor=0 console=ttyAMA0",
	} {
		if got := withSerialConsole(in, arch); got != want {
			t.Errorf("%s: %q, want %q", arch, got, want)
		}
	}
}

// The tests below check each device group's builder on its own; TestArgs
// above checks that Args puts them together.

// wantArgv runs one group builder and compares its argv exactly.
func wantArgv(t *testing.T, got []string, err error, want ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("argv\n got  %q\n want %q", got, want)
	}
}

// wantErr checks that a group builder failed naming want and gave no argv.
func wantErr(t *testing.T, got []string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want it to contain %q", err, want)
	}
	if got != nil {
		t.Errorf("argv %q returned with an error", got)
	}
}

func TestArgsGroupOrder(t *testing.T) {
	// The whole command line for the base spec, so a reordering of the
	// groups or a lost option shows here.
	const dir = "/home/u/.vmdock/default"
	argv, err := Args(baseSpec(), tcgEnv)
	wantArgv(t, argv, err,
		"-name", "vmdock-default"+nameOptions, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-msg", "timestamp=on",
		"-machine", "q35", "-accel", "tcg,thread=single,tb-size=128", "-cpu", "max", "-vga", "none",
		"-smp", "1", "-m", "2048", // 2 asked; one under TCG
		"-kernel", "/img/vmlinuz", "-initrd", "/img/initrd.img", "-append", "root=/dev/vda mitigations=off loglevel=6 console=ttyS0",
		"-pidfile", dir+"/qemu.pid",
		"-chardev", "socket,id=qmp,path="+dir+"/qmp.sock,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
		"-chardev", "file,id=serial0,path="+dir+"/serial.log,append=on", "-serial", "chardev:serial0",
		"-drive", "if=none,id=disk0,file="+dir+"/disk.raw,format=raw,cache=writeback,discard=unmap,detect-zeroes=unmap",
		"-device", "virtio-blk-pci,drive=disk0",
		"-drive", "if=none,id=disk1,file="+dir+"/boot.iso,format=raw,readonly=on,cache=writeback",
		"-device", "virtio-blk-pci,drive=disk1",
		"-drive", "if=none,id=disk2,file="+dir+"/data.raw,format=raw,cache=writeback,discard=unmap,detect-zeroes=unmap",
		"-device", "virtio-blk-pci,drive=disk2",
		"-netdev", "user,id=net0,restrict=on", "-device", "virtio-net-pci,netdev=net0",
		"-device", "virtio-rng-pci", "-device", "pvpanic", "-action", "panic=pause",
		"-device", "virtio-balloon-pci,id=balloon0,free-page-reporting=on,deflate-on-oom=on",
		"-device", "virtio-serial-pci,id=vser0",
		"-chardev", "socket,id=agent,path="+dir+"/agent.sock,server=on,wait=off",
		"-device", "virtserialport,bus=vser0.0,chardev=agent,name=org.vmdock.agent",
		"-virtfs", "local,path=/home/u,mount_tag=m0,security_model=none,multidevs=remap,id=fs0",
		"-virtfs", "local,path=/opt/ro,mount_tag=m1,security_model=none,multidevs=remap,id=fs1,readonly=on",
		"-device", "pcie-root-port,id=scratchport0,chassis=64,slot=0",
		"-device", "pcie-root-port,id=scratchport1,chassis=65,slot=0",
		"-device", "pcie-root-port,id=scratchport2,chassis=66,slot=0",
	)
}

func TestIdentityArgs(t *testing.T) {
	got, err := identityArgs("a,b")
	wantArgv(t, got, err, "-name", "vmdock-a,,b"+nameOptions, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-msg", "timestamp=on")
}

func TestMachineArgs(t *testing.T) {
	t.Run("x86 tcg", func(t *testing.T) {
		got, err := machineArgs("x86_64", AccelTCG, false)
		wantArgv(t, got, err, "-machine", "q35", "-accel", "tcg,thread=single,tb-size=128", "-cpu", "max", "-vga", "none")
	})
	t.Run("no accel yet is tcg", func(t *testing.T) {
		got, err := machineArgs("x86_64", "", false)
		wantArgv(t, got, err, "-machine", "q35", "-accel", "tcg,thread=single,tb-size=128", "-cpu", "max", "-vga", "none")
	})
	t.Run("x86 kvm with virtiofs", func(t *testing.T) {
		got, err := machineArgs("x86_64", AccelKVM, true)
		wantArgv(t, got, err, "-machine", "q35,memory-backend=mem", "-accel", "kvm", "-cpu", "host", "-vga", "none")
	})
	t.Run("arm64 hvf has no vga", func(t *testing.T) {
		got, err := machineArgs("aarch64", AccelHVF, false)
		wantArgv(t, got, err, "-machine", "virt", "-accel", "hvf", "-cpu", "host")
	})
	t.Run("arm64 tcg", func(t *testing.T) {
		got, err := machineArgs("aarch64", AccelTCG, false)
		wantArgv(t, got, err, "-machine", "virt", "-accel", "tcg,thread=single,tb-size=128", "-cpu", "max,pauth-impdef=on")
	})
	t.Run("unknown accel", func(t *testing.T) {
		got, err := machineArgs("x86_64", "whpx", false)
		wantErr(t, got, err, `accelerator "whpx": accepted values are kvm, hvf and tcg`)
	})
}

func TestMemoryArgs(t *testing.T) {
	got, err := memoryArgs(1, 128, false)
	wantArgv(t, got, err, "-smp", "1", "-m", "128")
	got, err = memoryArgs(4, 4096, true)
	wantArgv(t, got, err, "-smp", "4", "-m", "4096", "-object", "memory-backend-memfd,id=mem,size=4096M,share=on")
	got, err = memoryArgs(0, 2048, false)
	wantErr(t, got, err, "cpus 0: must be at least 1")
	got, err = memoryArgs(2, 127, false)
	wantErr(t, got, err, "memory 127 MiB: must be at least 128 MiB")
}

func TestBootArgs(t *testing.T) {
	spec := baseSpec()
	t.Run("kernel with initrd", func(t *testing.T) {
		got, err := bootArgs(spec, tcgEnv, "x86_64")
		wantArgv(t, got, err, "-kernel", "/img/vmlinuz", "-initrd", "/img/initrd.img", "-append", "root=/dev/vda mitigations=off loglevel=6 console=ttyS0")
		if bootsEFI(spec, tcgEnv) {
			t.Error("a kernel boot counts as EFI")
		}
	})
	t.Run("kernel alone on arm64", func(t *testing.T) {
		s := spec
		s.Initrd = ""
		got, err := bootArgs(s, tcgEnv, "aarch64")
		wantArgv(t, got, err, "-kernel", "/img/vmlinuz", "-append", "root=/dev/vda mitigations=off loglevel=6 console=ttyAMA0")
	})
	t.Run("kvm and hvf keep the image's command line", func(t *testing.T) {
		for _, accel := range []string{AccelKVM, AccelHVF} {
			got, err := bootArgs(spec, HostEnv{Accel: accel}, "x86_64")
			wantArgv(t, got, err, "-kernel", "/img/vmlinuz", "-initrd", "/img/initrd.img", "-append", "root=/dev/vda console=ttyS0")
		}
	})
	t.Run("no accelerator named is tcg", func(t *testing.T) {
		got, err := bootArgs(spec, HostEnv{}, "x86_64")
		wantArgv(t, got, err, "-kernel", "/img/vmlinuz", "-initrd", "/img/initrd.img", "-append", "root=/dev/vda mitigations=off loglevel=6 console=ttyS0")
	})
	t.Run("uefi", func(t *testing.T) {
		s := spec
		s.Kernel, s.Dir = "", "/i,d"
		env := HostEnv{Accel: AccelKVM, Firmware: Firmware{Code: "/fw/CODE,1.fd"}}
		got, err := bootArgs(s, env, "x86_64")
		wantArgv(t, got, err,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=/fw/CODE,,1.fd",
			"-drive", "if=pflash,format=raw,unit=1,file=/i,,d/efi-vars.fd")
		if !bootsEFI(s, env) {
			t.Error("a firmware boot does not count as EFI")
		}
	})
	t.Run("paused bios wins over a kernel", func(t *testing.T) {
		env := HostEnv{pausedBIOS: true}
		got, err := bootArgs(spec, env, "x86_64")
		wantArgv(t, got, err, "-S")
		s := spec
		s.Kernel = ""
		if bootsEFI(s, env) {
			t.Error("paused BIOS counts as EFI")
		}
	})
	t.Run("no firmware", func(t *testing.T) {
		s := spec
		s.Kernel = ""
		got, err := bootArgs(s, tcgEnv, "x86_64")
		wantErr(t, got, err, "no UEFI firmware for x86_64")
	})
}

func TestControlArgs(t *testing.T) {
	got, err := controlArgs("/d", "")
	wantArgv(t, got, err, "-pidfile", "/d/qemu.pid", "-chardev", "socket,id=qmp,path=/d/qmp.sock,server=on,wait=off", "-mon", "chardev=qmp,mode=control")
	got, err = controlArgs("/d", "/l,og")
	wantArgv(t, got, err, "-pidfile", "/d/qemu.pid", "-chardev", "socket,id=qmp,path=/d/qmp.sock,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
		"-chardev", "file,id=serial0,path=/l,,og,append=on", "-serial", "chardev:serial0")
}

func TestDiskArgs(t *testing.T) {
	disks := []driver.Disk{
		{Path: "/d/boot.iso", CDROM: true},
		{Path: "/d/disk.qcow2", Format: "qcow2"},
		{Path: "/d/ro.raw", Format: "raw", ReadOnly: true},
		{Path: "/d/data.raw", Format: "raw"},
	}
	t.Run("efi marks the first disk that is no iso", func(t *testing.T) {
		got, err := diskArgs(disks, driver.DiskSyncFull, true)
		wantArgv(t, got, err,
			"-drive", "if=none,id=disk0,file=/d/boot.iso,format=raw,readonly=on,cache=writeback", "-device", "virtio-blk-pci,drive=disk0",
			"-drive", "if=none,id=disk1,file=/d/disk.qcow2,format=qcow2,cache=writeback,discard=unmap,detect-zeroes=unmap", "-device", "virtio-blk-pci,drive=disk1,bootindex=0",
			"-drive", "if=none,id=disk2,file=/d/ro.raw,format=raw,readonly=on,cache=writeback", "-device", "virtio-blk-pci,drive=disk2",
			"-drive", "if=none,id=disk3,file=/d/data.raw,format=raw,cache=writeback,discard=unmap,detect-zeroes=unmap", "-device", "virtio-blk-pci,drive=disk3",
		)
	})
	t.Run("kernel boot has no bootindex and sync none is unsafe", func(t *testing.T) {
		got, err := diskArgs(disks[1:2], driver.DiskSyncNone, false)
		wantArgv(t, got, err,
			"-drive", "if=none,id=disk0,file=/d/disk.qcow2,format=qcow2,cache=unsafe,discard=unmap,detect-zeroes=unmap", "-device", "virtio-blk-pci,drive=disk0")
	})
	t.Run("serials go on the device, for the guest's by-id links", func(t *testing.T) {
		got, err := diskArgs([]driver.Disk{{Path: "/d/disk.raw", Format: "raw", Serial: driver.SerialRoot}, {Path: "/d/data.raw", Format: "raw", Serial: driver.SerialData}}, driver.DiskSyncFull, false)
		wantArgv(t, got, err,
			"-drive", "if=none,id=disk0,file=/d/disk.raw,format=raw,cache=writeback,discard=unmap,detect-zeroes=unmap", "-device", "virtio-blk-pci,drive=disk0,serial=vmdock-root",
			"-drive", "if=none,id=disk1,file=/d/data.raw,format=raw,cache=writeback,discard=unmap,detect-zeroes=unmap", "-device", "virtio-blk-pci,drive=disk1,serial=vmdock-data")
	})
	t.Run("no disks", func(t *testing.T) {
		got, err := diskArgs(nil, "", true)
		if err != nil || len(got) != 0 {
			t.Errorf("diskArgs(nil) = %q, %v", got, err)
		}
	})
	for _, tt := range []struct {
		name  string
		disk  driver.Disk
		sync  string
		error string
	}{
		{"no path", driver.Disk{Format: "raw"}, "", "disk 0 has no path"},
		{"no format", driver.Disk{Path: "/x"}, "", "disk /x has no format"},
		{"bad format", driver.Disk{Path: "/x", Format: "vdi"}, "", `disk /x format "vdi": accepted values are raw and qcow2`},
		{"bad sync", driver.Disk{Path: "/x", Format: "raw"}, "maybe", `disk sync "maybe"`},
		{"serial with a comma", driver.Disk{Path: "/x", Format: "raw", Serial: "a,drive=b"}, "", `disk serial "a,drive=b": character ','`},
		{"serial too long", driver.Disk{Path: "/x", Format: "raw", Serial: "vmdock-data-disk-00001"}, "", "22 bytes, at most 20 are accepted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := diskArgs([]driver.Disk{tt.disk}, tt.sync, false)
			wantErr(t, got, err, tt.error)
		})
	}
}

func TestNetworkArgs(t *testing.T) {
	for network, netdev := range map[string]string{"": "user,id=net0", driver.NetworkUser: "user,id=net0", driver.NetworkIsolated: "user,id=net0,restrict=on"} {
		for _, stack := range []string{"", driver.NetStackSlirp} {
			got, err := networkArgs(network, stack, "")
			wantArgv(t, got, err, "-netdev", netdev, "-device", "virtio-net-pci,netdev=net0")
		}
	}
	got, err := networkArgs("vmnet", "", "")
	wantErr(t, got, err, `network "vmnet": accepted values are user and isolated`)
	got, err = networkArgs(driver.NetworkUser, "vznat", "")
	wantErr(t, got, err, `network stack "vznat": accepted values on qemu are slirp and gvisor`)
}

// The host agent's stack: the NIC on the socket at netFD, with the MAC
// the spec gives (the one the stack's static lease gives 10.0.2.15),
// isolated or not (the stack isolates, not qemu); no MAC, no NIC.
func TestNetworkArgsGvisor(t *testing.T) {
	for _, network := range []string{driver.NetworkUser, driver.NetworkIsolated} {
		got, err := networkArgs(network, driver.NetStackGvisor, "52:54:00:ab:cd:ef")
		wantArgv(t, got, err, "-netdev", "socket,id=net0,fd=4", "-device", "virtio-net-pci,netdev=net0,mac=52:54:00:ab:cd:ef")
	}
	for _, mac := range []string{"", "52:54:00"} {
		got, err := networkArgs(driver.NetworkUser, driver.NetStackGvisor, mac)
		wantErr(t, got, err, `network stack gvisor: the NIC's MAC "`+mac+`": accepted: a MAC address`)
	}
}

// The stack's socket is always descriptor 4: after the resume state's 3,
// or after a closed 3 on a cold boot.
func TestWithNetFile(t *testing.T) {
	net, state := os.NewFile(uintptr(os.Stdin.Fd()), "net"), os.NewFile(uintptr(os.Stdin.Fd()), "state")
	spec := driver.Spec{NetStack: driver.NetStackGvisor, NetFile: net}
	got, err := withNetFile(nil, spec)
	if err != nil || len(got) != 2 || got[0] != nil || got[1] != net {
		t.Errorf("cold boot files %v, %v; want [nil net]", got, err)
	}
	got, err = withNetFile([]*os.File{state}, spec)
	if err != nil || len(got) != 2 || got[0] != state || got[1] != net {
		t.Errorf("resume files %v, %v; want [state net]", got, err)
	}
	if _, err := withNetFile(nil, driver.Spec{NetStack: driver.NetStackGvisor}); err == nil {
		t.Error("gvisor without a socket accepted")
	}
	if got, err := withNetFile([]*os.File{state}, driver.Spec{}); err != nil || len(got) != 1 {
		t.Errorf("slirp files %v, %v; want [state]", got, err)
	}
}

func TestGuestDeviceArgs(t *testing.T) {
	got, err := guestDeviceArgs("x86_64")
	// The balloon is only there for free page reporting; deflate-on-oom
	// keeps the guest alive should it ever be inflated.
	const balloon = "virtio-balloon-pci,id=balloon0,free-page-reporting=on,deflate-on-oom=on"
	wantArgv(t, got, err, "-device", "virtio-rng-pci", "-device", "pvpanic", "-action", "panic=pause", "-device", balloon)
	got, err = guestDeviceArgs("aarch64")
	wantArgv(t, got, err, "-device", "virtio-rng-pci", "-device", "pvpanic-pci", "-action", "panic=pause", "-device", balloon)
}

func TestAgentChannelArgs(t *testing.T) {
	got, err := agentChannelArgs("/a,b")
	wantArgv(t, got, err,
		"-device", "virtio-serial-pci,id=vser0",
		"-chardev", "socket,id=agent,path=/a,,b/agent.sock,server=on,wait=off",
		"-device", "virtserialport,bus=vser0.0,chardev=agent,name="+agent.SerialName)
}

func TestShareArgs(t *testing.T) {
	spec := driver.Spec{
		Dir: "/d",
		Shares: []mounts.Share{
			{Tag: "m0", HostPath: "/home/u", Type: mounts.Type9p},
			{Tag: "m,1", HostPath: "/src", Type: mounts.TypeVirtiofs},
			{Tag: "m2", HostPath: "/ro", ReadOnly: true, Type: mounts.Type9p},
		},
	}
	t.Run("each share by its own type", func(t *testing.T) {
		got, err := shareArgs(spec, "/usr/libexec/virtiofsd")
		wantArgv(t, got, err,
			"-virtfs", "local,path=/home/u,mount_tag=m0,security_model=none,multidevs=remap,id=fs0",
			"-chardev", "socket,id=vfs1,path=/d/virtiofs-1.sock", "-device", "vhost-user-fs-pci,chardev=vfs1,tag=m,,1",
			"-virtfs", "local,path=/ro,mount_tag=m2,security_model=none,multidevs=remap,id=fs2,readonly=on",
		)
	})
	t.Run("no shares need no mount type", func(t *testing.T) {
		got, err := shareArgs(driver.Spec{Dir: "/d"}, "")
		if err != nil || len(got) != 0 {
			t.Errorf("shareArgs without shares = %q, %v", got, err)
		}
	})
	for _, tt := range []struct {
		name   string
		mutate func(*driver.Spec)
		vfsd   string
		error  string
	}{
		{"virtiofs share without virtiofsd", nil, "", "needs virtiofsd"},
		{"unknown share type", func(s *driver.Spec) { s.Shares[0].Type = "smb" }, "/v", `share /home/u: mount type "smb"`},
		{"share without a type", func(s *driver.Spec) { s.Shares[2].Type = "" }, "/v", `share /ro: mount type "": accepted values are virtiofs and 9p`},
		{"without virtiofs shares no virtiofsd is needed", func(s *driver.Spec) { s.Shares[1].Type = "nfs" }, "", `share /src: mount type "nfs"`},
		{"no tag", func(s *driver.Spec) { s.Shares[2].Tag = "" }, "/v", "share 2 needs a tag and a host path"},
		{"no host path", func(s *driver.Spec) { s.Shares[0].HostPath = "" }, "/v", "share 0 needs a tag and a host path"},
		{"tag twice", func(s *driver.Spec) { s.Shares[2].Tag = "m0" }, "/v", `share tag "m0" is used twice`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := spec
			s.Shares = slices.Clone(spec.Shares)
			if tt.mutate != nil {
				tt.mutate(&s)
			}
			got, err := shareArgs(s, tt.vfsd)
			wantErr(t, got, err, tt.error)
		})
	}
}

// allShares gives every share of s mount type t.
func allShares(s *driver.Spec, t string) {
	for i := range s.Shares {
		s.Shares[i].Type = t
	}
}

// Under TCG the guest gets one vCPU whatever it asked for (one host thread
// emulates them all); with a hardware accelerator it gets every one.
func TestTCGGuestsGetOneVCPU(t *testing.T) {
	for _, tt := range []struct {
		cpus  int
		accel string
		want  int
	}{{4, "tcg", 1}, {1, "tcg", 1}, {4, "kvm", 4}, {2, "hvf", 2}, {0, "tcg", 0}} {
		if got := GuestCPUs(tt.cpus, tt.accel); got != tt.want {
			t.Errorf("GuestCPUs(%d, %s) = %d, want %d", tt.cpus, tt.accel, got, tt.want)
		}
	}
	spec := driver.Spec{Name: "x", Dir: "/d", Arch: driver.ArchAMD64, CPUs: 4, MemoryMiB: 1024, Kernel: "/k", Network: driver.NetworkUser}
	for accel, want := range map[string]string{"tcg": "1", "kvm": "4"} {
		args, err := Args(spec, HostEnv{Accel: accel, Version: Version{7, 2, 22}})
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.Index(args, "-smp"); i < 0 || args[i+1] != want {
			t.Errorf("%s: -smp %v, want %s", accel, args, want)
		}
	}
	if n := cpuNote(4, "tcg"); !strings.Contains(n, "1 vCPU of the 4 asked") {
		t.Errorf("cpuNote(4, tcg) = %q", n)
	}
	if n := cpuNote(4, "kvm"); n != "" {
		t.Errorf("cpuNote(4, kvm) = %q, want none", n)
	}
}
