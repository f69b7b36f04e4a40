package guest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent"
)

func TestParseProcNet(t *testing.T) {
	const hdr = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	tests := []struct {
		name, proto, line string
		want              []portKey
	}{
		{"tcp listen loopback", "tcp", "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234", []portKey{{"tcp", "127.0.0.1", 8080}}},
		{"resolved stub 127.0.0.53 skipped", "tcp", "   3: 3500007F:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234", nil},
		{"tcp listen any", "tcp", "   1: 00000000:0016 00000000:0000 0A 0 0 0 0 0 1", []portKey{{"tcp", "0.0.0.0", 22}}},
		{"tcp established skipped", "tcp", "   2: 0100007F:1F90 0100007F:C350 01 0 0 0 0 0 1", nil},
		{"tcp on eth0 skipped", "tcp", "   3: 0F02000A:1F90 00000000:0000 0A 0 0 0 0 0 1", nil},
		{"tcp6 any", "tcp", "   0: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 0 0 0 0 0 1", []portKey{{"tcp", "::", 80}}},
		{"tcp6 loopback", "tcp", "   0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 0 0 0 0 0 1", []portKey{{"tcp", "::1", 80}}},
		{"udp bound", "udp", "  10: 00000000:0035 00000000:0000 07 0 0 0 0 0 1", []portKey{{"udp", "0.0.0.0", 53}}},
		{"udp connected skipped", "udp", "  10: 0100007F:0035 0100007F:0035 01 0 0 0 0 0 1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcNet(strings.NewReader(hdr+tt.line+"\n"), tt.proto)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) || (len(got) == 1 && got[0] != tt.want[0]) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if _, err := parseProcNet(strings.NewReader(hdr+"0: XYZ:0050 00000000:0000 0A\n"), "tcp"); err == nil {
		t.Fatal("bad hex: want an error")
	}
}

func TestMount(t *testing.T) {
	s, fos := newTestServer(t)
	mi := filepath.Join(s.Root, "proc/self/mountinfo")
	m := agent.MountRequest{Type: "9p", Tag: "share0", Target: "/home/me/my project", ReadOnly: true}
	must(t, s.mount(context.Background(), m))
	if want := "mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap,ro share0 /home/me/my project"; fos.ran() != want {
		t.Fatalf("ran %q, want %q", fos.ran(), want)
	}
	if _, err := os.Stat(filepath.Join(s.Root, m.Target)); err != nil {
		t.Fatalf("mount point not created: %v", err)
	}
	// Once mounted (note the kernel's \040 for the space) it is a no-op.
	must(t, os.WriteFile(mi, []byte("30 22 0:40 / /home/me/my\\040project ro - 9p share0 ro\n"), 0o644))
	must(t, s.mount(context.Background(), m))
	if n := strings.Count(fos.ran(), "mount"); n != 1 {
		t.Fatalf("mounted again: %s", fos.ran())
	}
	for _, bad := range []agent.MountRequest{
		{Type: "nfs", Tag: "t", Target: "/x"},
		{Type: "9p", Tag: "", Target: "/x"},
		{Type: "9p", Tag: "t", Target: "relative"},
		{Type: "9p", Tag: "t", Target: "/"},
	} {
		if err := s.mount(context.Background(), bad); err == nil {
			t.Errorf("mount %+v: want an error", bad)
		}
	}
}

func TestSetup(t *testing.T) {
	s, fos := newTestServer(t)
	fos.results = map[string]error{"blkid": exitErr(2), "iptables -t nat -C": exitErr(1)}
	leases := filepath.Join(s.Root, leasesDir)
	must(t, os.MkdirAll(leases, 0o755))
	must(t, os.WriteFile(filepath.Join(leases, "2"), []byte("ADDRESS=10.0.2.15\nDNS=10.0.2.3\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(s.Root, "etc/hosts"), []byte("127.0.0.1 localhost\n127.0.1.1 old\n"), 0o644))
	err := s.setup(context.Background(), agent.Setup{
		Hostname: "vmdock", Env: map[string]string{"A": "1 2"}, TimeUnixNs: 5, GrowRoot: true,
		DataDisk: "/dev/vdb", HostAccessIP: "10.254.254.254",
	})
	must(t, err)
	defer s.hostAccess.Close()
	ran := fos.ran()
	for _, want := range []string{
		"hostname vmdock", "resize2fs /dev/vda", "mkfs.ext4 -q -L vmdock-data /dev/vdb",
		"mount -t ext4 /dev/vdb /var/lib/vmdock-data", "mount --bind /var/lib/vmdock-data/docker /var/lib/docker",
		"ip addr replace 10.254.254.254/32 dev lo", "iptables -t nat -I OUTPUT 1 -j VMDOCK-HOST",
		"-d 10.254.254.254 -j REDIRECT --to-ports",
	} {
		if !strings.Contains(ran, want) {
			t.Errorf("missing command %q in:\n%s", want, ran)
		}
	}
	files := map[string]string{
		"etc/resolv.conf": "nameserver 10.0.2.3\n", "etc/environment": "A=\"1 2\"\n",
		"etc/hosts": "127.0.1.1\tvmdock\n10.254.254.254\thost.docker.internal\n",
	}
	for f, want := range files {
		b, _ := os.ReadFile(filepath.Join(s.Root, f))
		if !strings.Contains(string(b), want) {
			t.Errorf("%s = %q, want it to contain %q", f, b, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(s.Root, "etc/hosts")); strings.Contains(string(b), "old") {
		t.Errorf("old hostname kept: %s", b)
	}
	for _, bad := range []agent.Setup{{Hostname: "bad_name!"}, {DNS: []string{"dns.example"}}, {Env: map[string]string{"1X": "y"}}, {HostAccessIP: "::1"}} {
		if err := s.setup(context.Background(), bad); err == nil {
			t.Errorf("setup %+v: want an error", bad)
		}
	}
}
