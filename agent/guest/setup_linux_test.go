package guest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/dnsforward"
	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
	"github.com/vmdock/vmdock/agent/guest/hostaccess"
)

func TestSetup(t *testing.T) {
	s, fos := newTestServer(t)
	fos.Results = map[string]error{"blkid": guestostest.ExitErr(2)}
	leases := filepath.Join(s.Root, dnsforward.LeasesDir)
	must(t, os.MkdirAll(leases, 0o755))
	must(t, os.WriteFile(filepath.Join(leases, "2"), []byte("ADDRESS=10.0.2.15\nDNS=10.0.2.3\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(s.Root, "etc/hosts"), []byte("127.0.0.1 localhost\n127.0.1.1 old\n"), 0o644))
	err := s.setup(context.Background(), agent.Setup{
		Hostname: "vmdock", Env: map[string]string{"A": "1 2"}, TimeUnixNs: 5, GrowRoot: true,
		DataDisk: "/dev/vdb", HostAccessIP: "10.254.254.254",
	})
	must(t, err)
	defer s.rooms().host.Close()
	ran := fos.Ran()
	for _, want := range []string{
		"resize2fs /dev/vda", "mkfs.ext4 -q -E lazy_itable_init=0 -L vmdock-data /dev/vdb",
		"mount -t ext4 /dev/vdb /var/lib/vmdock-data", "mount --bind /var/lib/vmdock-data/docker /var/lib/docker",
		"ip addr replace 10.254.254.254/32 dev lo", "iptables -t nat -S",
		"iptables-restore --noflush " + filepath.Join(s.Root, hostaccess.RulesFile),
	} {
		if !strings.Contains(ran, want) {
			t.Errorf("missing command %q in:\n%s", want, ran)
		}
	}
	rules, _ := os.ReadFile(filepath.Join(s.Root, hostaccess.RulesFile))
	for _, want := range []string{"-I OUTPUT 1 -j VMDOCK-HOST\n", "-I PREROUTING 1 -j VMDOCK-HOST\n", "-d 10.254.254.254 -j REDIRECT --to-ports "} {
		if !strings.Contains(string(rules), want) {
			t.Errorf("missing rule %q in:\n%s", want, rules)
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
	if got := strings.Join(fos.SyscallMounts, " "); got != "/var/lib/vmdock-data /var/lib/docker /var/lib/containerd" {
		t.Errorf("data disk mounts made with mount(2): %q, want all three", got)
	}
	if fos.Hostname != "vmdock" {
		t.Errorf("kernel host name set to %q, want vmdock", fos.Hostname)
	}
	if strings.Contains(ran, "hostname") {
		t.Errorf("a process was run for the host name:\n%s", ran)
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

// The sync service needs the data disk too: the engine's state and the
// copies must live on the same disk.
func TestSyncRefusedWithoutDataDisk(t *testing.T) {
	s, _ := newTestServer(t)
	c, _ := connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.OpenSync(ctx); err == nil || !strings.Contains(err.Error(), "data disk is not mounted") {
		t.Fatalf("OpenSync without the data disk: %v", err)
	}
}

// The sync-watch stream names the sync mount whose guest copy changed,
// once per burst, and nothing for its excluded folders.
func TestSyncWatchReportsChangedCopies(t *testing.T) {
	s, _ := newTestServer(t)
	for _, d := range []string{"s1", "s2", "s2/node_modules"} {
		must(t, os.MkdirAll(filepath.Join(s.Root, agent.GuestSyncDir, d), 0o755))
	}
	c, _ := connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan string, 10)
	go c.WatchSync(ctx, agent.SyncWatch{Mounts: []agent.SyncWatchMount{{ID: "s1"}, {ID: "s2", Exclude: []string{"node_modules"}}}}, func(id string) { got <- id })
	time.Sleep(300 * time.Millisecond) // the watch is set up after the request
	must(t, os.WriteFile(filepath.Join(s.Root, agent.GuestSyncDir, "s2/node_modules/x"), []byte("x"), 0o644))
	for i := 0; i < 20; i++ {
		must(t, os.WriteFile(filepath.Join(s.Root, agent.GuestSyncDir, "s2", fmt.Sprintf("f%d", i)), []byte("x"), 0o644))
	}
	select {
	case id := <-got:
		if id != "s2" {
			t.Fatalf("change reported for %q, want s2", id)
		}
	case <-ctx.Done():
		t.Fatal("no change reported")
	}
	select {
	case id := <-got:
		t.Fatalf("a second report (%q) for one burst", id)
	case <-time.After(400 * time.Millisecond):
	}
}

// A failing step is named in setup's error, with every reason.
func TestSetupNamesTheFailingStep(t *testing.T) {
	s, fos := newTestServer(t)
	fos.Results = map[string]error{"update-binfmts": guestostest.ExitErr(2), "systemctl": guestostest.ExitErr(5)}
	err := s.setup(context.Background(), agent.Setup{Binfmt: true})
	if err == nil || !strings.Contains(err.Error(), "binfmt: exit status 2") || !strings.Contains(err.Error(), "exit status 5") {
		t.Fatalf("both failing: %v; want both reasons", err)
	}
}
