package guest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent"
)

// The data disk's file system is grown after it is mounted and bound, on
// every boot (also when it was already mounted), so a disk the host grew
// is taken into use even if an earlier boot stopped before growing it.
func TestDataDiskGrowsFileSystem(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, s.dataDisk(context.Background(), "/dev/vdb"))
	cmds := strings.Split(fos.ran(), "\n")
	if last := cmds[len(cmds)-1]; last != "resize2fs /dev/vdb" {
		t.Fatalf("last command %q, want the resize after mounting:\n%s", last, fos.ran())
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
	if got := fos2.ran(); got != "blkid -o value -s TYPE /dev/vdb\nresize2fs /dev/vdb" {
		t.Errorf("on a mounted data disk ran:\n%s\nwant only blkid and resize2fs", got)
	}
}

func TestDataDiskGrowFailureIsReported(t *testing.T) {
	s, fos := newTestServer(t)
	fos.results = map[string]error{"resize2fs": exitErr(1)}
	err := s.setup(context.Background(), agent.Setup{DataDisk: "/dev/vdb"})
	if err == nil || !strings.Contains(err.Error(), "data disk: grow the file system on /dev/vdb") {
		t.Fatalf("err = %v, want the failed grow named", err)
	}
	// The binds came first: docker still finds its folders.
	if !strings.Contains(fos.ran(), "mount --bind /var/lib/vmdock-data/containerd /var/lib/containerd") {
		t.Errorf("binds skipped after a failed grow:\n%s", fos.ran())
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
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-L", dataLabel, img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	s := &Server{OS: RealOS{}}
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
