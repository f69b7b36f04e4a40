package qemu

import (
	"slices"
	"strings"
	"testing"

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
		Shares:    []driver.Share{{Tag: "m0", HostPath: "/home/u"}, {Tag: "m1", HostPath: "/opt/ro", ReadOnly: true}},
		MountType: driver.Mount9p,
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
				"-accel":   {"tcg,thread=single"},
				"-cpu":     {"max"},
				"-display": {"none"},
				"-vga":     {"none"},
				"-smp":     {"2"},
				"-m":       {"2048"},
				"-kernel":  {"/img/vmlinuz"},
				"-initrd":  {"/img/initrd.img"},
				"-append":  {"root=/dev/vda console=ttyS0"},
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
			want:   map[string][]string{"-machine": {"virt"}, "-accel": {"tcg,thread=single"}, "-cpu": {"max,pauth-impdef=on"}, "-append": {"root=/dev/vda console=ttyAMA0"}},
			absent: []string{"-vga"},
		},
		{
			name: "virtiofs shares use vhost-user-fs and shared memfd RAM",
			mutate: func(s *driver.Spec) {
				s.MountType = driver.MountVirtiofs
			},
			env: HostEnv{Accel: AccelTCG, VirtiofsdPath: "/usr/libexec/virtiofsd"},
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
				s.Shares = []driver.Share{{Tag: "t", HostPath: "/src/x,y"}}
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
		{"bad mount type", func(s *driver.Spec) { s.MountType = "nfs" }, tcgEnv, `mount type "nfs"`},
		{"shares without mount type", func(s *driver.Spec) { s.MountType = "" }, tcgEnv, "no mount type"},
		{"duplicate tag", func(s *driver.Spec) { s.Shares[1].Tag = "m0" }, tcgEnv, `share tag "m0" is used twice`},
		{"bad disk format", func(s *driver.Spec) { s.Disks[0].Format = "vmdk" }, tcgEnv, `format "vmdk": accepted values are raw and qcow2`},
		{"missing disk format", func(s *driver.Spec) { s.Disks[0].Format = "" }, tcgEnv, "has no format"},
		{"bad accel", nil, HostEnv{Accel: "whpx"}, `accelerator "whpx"`},
		{"old qemu", nil, HostEnv{Accel: AccelTCG, Version: Version{5, 2, 0}}, "qemu 5.2.0 is too old"},
		{"no x86 firmware", func(s *driver.Spec) { s.Kernel = "" }, tcgEnv, "install the ovmf package"},
		{"no arm64 firmware", func(s *driver.Spec) { s.Kernel, s.Arch = "", driver.ArchARM64 }, tcgEnv, "install the qemu-efi-aarch64 package"},
		{"virtiofs without daemon", func(s *driver.Spec) { s.MountType = driver.MountVirtiofs }, tcgEnv, "needs virtiofsd"},
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
