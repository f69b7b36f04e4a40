package disks

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

// The data disk's file system is grown after it is mounted and bound, on
// every boot (also when it was already mounted), so a disk the host grew
// is taken into use even if an earlier boot stopped before growing it.
func TestDataDiskGrowsFileSystem(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, s.dataDisk(context.Background(), "/dev/vdb"))
	cmds := strings.Split(fos.Ran(), "\n")
	if last := cmds[len(cmds)-1]; last != "resize2fs /dev/vdb" {
		t.Fatalf("last command %q, want the resize after mounting:\n%s", last, fos.Ran())
	}

	// Mounted already (a reconnecting host agent sends setup again).
	mi := filepath.Join(s.Root, "proc/self/mountinfo")
	must(t, os.WriteFile(mi, []byte("22 1 254:0 / / rw - ext4 /dev/vda rw\n"+
		"30 22 254:16 / /var/lib/vmdock-data rw - ext4 /dev/vdb rw\n"+
		"31 22 254:16 /docker /var/lib/docker rw - ext4 /dev/vdb rw\n"+
		"32 22 254:16 /containerd /var/lib/containerd rw - ext4 /dev/vdb rw\n"), 0o644))
	s2, fos2 := newTestServer(t)
	s2.Root = s.Root
	must(t, s2.dataDisk(context.Background(), "/dev/vdb"))
	if got := fos2.Ran(); got != "blkid -o value -s TYPE /dev/vdb\nresize2fs /dev/vdb" {
		t.Errorf("on a mounted data disk ran:\n%s\nwant only blkid and resize2fs", got)
	}
}

func TestDataDiskGrowFailureIsReported(t *testing.T) {
	s, fos := newTestServer(t)
	fos.Results = map[string]error{"resize2fs": guestostest.ExitErr(1)}
	err := s.SetupDataDisk(context.Background(), "/dev/vdb", "")
	if err == nil || !strings.Contains(err.Error(), "grow the file system on /dev/vdb") {
		t.Fatalf("err = %v, want the failed grow named", err)
	}
	// The binds came first: docker still finds its folders.
	if !strings.Contains(fos.Ran(), "mount --bind /var/lib/vmdock-data/containerd /var/lib/containerd") {
		t.Errorf("binds skipped after a failed grow:\n%s", fos.Ran())
	}
}

// growFS with the real tools on an ext4 image in a file: the host grows
// the file (as images.EnsureDataDisk does), resize2fs takes the new space.
// Offline here, because online resizing needs a mount and CAP_SYS_RESOURCE
// that test machines and containers often lack; the e2e covers online.
func TestGrowFSRealExt4(t *testing.T) {
	for _, tool := range []string{"mkfs.ext4", "resize2fs", "dumpe2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (e2fsprogs)", tool)
		}
	}
	img := filepath.Join(t.TempDir(), "data.raw")
	must(t, os.WriteFile(img, nil, 0o600))
	must(t, os.Truncate(img, 32<<20))
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-L", DataLabel, img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	s := &Disks{Sys: guestos.Sys{OS: guestos.RealOS{}}}
	ctx := context.Background()
	must(t, s.growFS(ctx, img)) // nothing to do: must not fail
	if got := ext4Bytes(t, img); got != 32<<20 {
		t.Fatalf("file system is %d bytes before growing, want %d", got, 32<<20)
	}
	must(t, os.Truncate(img, 96<<20))
	must(t, s.growFS(ctx, img))
	if got := ext4Bytes(t, img); got != 96<<20 {
		t.Errorf("file system is %d bytes after growing, want %d", got, 96<<20)
	}
}

// ext4Bytes is the file system size that dumpe2fs reports.
func ext4Bytes(t *testing.T, img string) int64 {
	t.Helper()
	out, err := exec.Command("dumpe2fs", "-h", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dumpe2fs: %v\n%s", err, out)
	}
	var blocks, size int64
	for _, l := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "Block count":
			blocks, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		case "Block size":
			size, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if blocks == 0 || size == 0 {
		t.Fatalf("no block count or size in dumpe2fs output:\n%s", out)
	}
	return blocks * size
}

// devTree makes a fake /dev and /sys under s.Root: disks holds each
// virtio disk's serial ("" for none), links the by-id links udev made.
func devTree(t *testing.T, s *Disks, disks map[string]string, links map[string]string) {
	t.Helper()
	for name, serial := range disks {
		must(t, os.MkdirAll(filepath.Join(s.Root, "sys/block", name), 0o755))
		must(t, os.MkdirAll(filepath.Join(s.Root, "dev"), 0o755))
		must(t, os.WriteFile(filepath.Join(s.Root, "dev", name), nil, 0o644))
		if serial != "" {
			must(t, os.WriteFile(filepath.Join(s.Root, "sys/block", name, "serial"), []byte(serial+"\n"), 0o644))
		}
	}
	for link, target := range links {
		p := filepath.Join(s.Root, link)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.Symlink(target, p))
	}
}

func TestDataDiskDeviceFindsTheDiskBySerial(t *testing.T) {
	const link = "/dev/disk/by-id/virtio-vmdock-data"
	tests := []struct {
		name     string
		disks    map[string]string
		links    map[string]string
		fallback string
		want     string
		logged   string // in the log line, "" for none
		err      string
	}{
		{name: "by-id link, not attach order", disks: map[string]string{"vda": "vmdock-root", "vdb": "", "vdc": "vmdock-data"},
			links: map[string]string{link: "../../vdc"}, fallback: "/dev/vdb", want: "/dev/vdc"},
		{name: "absolute link", disks: map[string]string{"vdd": "vmdock-data"},
			links: map[string]string{link: "/dev/vdd"}, fallback: "/dev/vdb", want: "/dev/vdd"},
		{name: "no link yet: the serial in sysfs", disks: map[string]string{"vda": "vmdock-root", "vdb": "cidata", "vdc": "vmdock-data"},
			fallback: "/dev/vdb", want: "/dev/vdc", logged: "found by its serial"},
		{name: "a dangling link: the serial in sysfs", disks: map[string]string{"vdc": "vmdock-data"},
			links: map[string]string{link: "../../vdz"}, fallback: "/dev/vdb", want: "/dev/vdc", logged: "found by its serial"},
		{name: "no link, no serial: attach order", disks: map[string]string{"vda": "", "vdb": ""},
			fallback: "/dev/vdb", want: "/dev/vdb", logged: "using the device by attach order"},
		{name: "nothing and no fallback", disks: map[string]string{"vda": ""}, err: `no /dev/disk/by-id/virtio-vmdock-data and no disk with serial "vmdock-data"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t)
			var logs strings.Builder
			s.Log = slog.New(slog.NewTextHandler(&logs, nil))
			devTree(t, s, tt.disks, tt.links)
			got, err := s.dataDiskDevice(link, tt.fallback)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("dataDiskDevice = %q, %v; want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("dataDiskDevice = %q, %v; want %s", got, err, tt.want)
			}
			if tt.logged == "" && logs.Len() > 0 || !strings.Contains(logs.String(), tt.logged) {
				t.Errorf("log = %q, want %q", logs.String(), tt.logged)
			}
		})
	}
	s, _ := newTestServer(t)
	if got, err := s.dataDiskDevice("/dev/vdb", ""); err != nil || got != "/dev/vdb" {
		t.Errorf("a plain device name: %q, %v; want it as it is", got, err)
	}
}

// Setup formats and mounts the disk the link names, wherever it is attached.
func TestSetupUsesTheDataDiskItsLinkNames(t *testing.T) {
	s, fos := newTestServer(t)
	devTree(t, s, map[string]string{"vdb": "cidata", "vdc": "vmdock-data"},
		map[string]string{"/dev/disk/by-id/virtio-vmdock-data": "../../vdc"})
	fos.Results = map[string]error{"blkid": guestostest.ExitErr(2)}
	must(t, s.SetupDataDisk(context.Background(), "/dev/disk/by-id/virtio-vmdock-data", "/dev/vdb"))
	ran := fos.Ran()
	for _, want := range []string{"mkfs.ext4 -q -E lazy_itable_init=0 -L " + DataLabel + " /dev/vdc", "mount -t ext4 /dev/vdc /var/lib/vmdock-data", "resize2fs /dev/vdc"} {
		if !strings.Contains(ran, want) {
			t.Errorf("setup ran:\n%s\nwant %q", ran, want)
		}
	}
	if strings.Contains(ran, "/dev/vdb") {
		t.Errorf("setup touched /dev/vdb, the disk at the data disk's usual place:\n%s", ran)
	}
}
