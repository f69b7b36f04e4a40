package portlist

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeProc is a /proc with the agent (self) and the given processes, each
// a comm, a mount namespace and socket inodes, and one net/tcp table.
type fakeProcess struct {
	pid, comm, mntNS string
	sockets          []string
}

const hostMntNS = "mnt:[4026531841]"

func writeFakeProc(t *testing.T, tcp string, procs ...fakeProcess) string {
	t.Helper()
	proc := t.TempDir()
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(proc, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		if err := os.Symlink(target, filepath.Join(proc, p)); err != nil {
			t.Fatal(err)
		}
	}
	mk("self/ns")
	link(hostMntNS, "self/ns/mnt")
	mk("net")
	if err := os.WriteFile(filepath.Join(proc, "net", "tcp"), []byte(tcp), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		mk(p.pid + "/ns")
		mk(p.pid + "/fd")
		link(p.mntNS, p.pid+"/ns/mnt")
		if err := os.WriteFile(filepath.Join(proc, p.pid, "comm"), []byte(p.comm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		link("/dev/null", p.pid+"/fd/0")
		for i, s := range p.sockets {
			link("socket:["+s+"]", p.pid+"/fd/"+string(rune('3'+i)))
		}
	}
	return proc
}

func TestOwnedByFindsTheRuntimesOwnListeners(t *testing.T) {
	const tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:9288 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5551 1 0 100 0 0 10 0\n" + // 127.0.0.1:37512, containerd's CRI stream
		"   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7771 1 0 100 0 0 10 0\n" + // 0.0.0.0:8080, a user's server
		"   2: 00000000:2328 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 8881 1 0 100 0 0 10 0\n" + // 0.0.0.0:9000, containerd in a container
		"   3: 0100007F:9288 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 5552 1 0 100 0 0 10 0\n" // established: not a listener
	proc := writeFakeProc(t, tcp,
		fakeProcess{pid: "412", comm: "containerd", mntNS: hostMntNS, sockets: []string{"5551", "5552"}},
		fakeProcess{pid: "900", comm: "nginx", mntNS: hostMntNS, sockets: []string{"7771"}},
		fakeProcess{pid: "1200", comm: "containerd", mntNS: "mnt:[4026532301]", sockets: []string{"8881"}},
	)
	got, err := OwnedBy(proc, filepath.Join(proc, "net"), []string{"containerd", "dockerd", "buildkitd"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Port{{Proto: "tcp", IP: localhost4, Port: 37512}}
	if !slices.Equal(got, want) {
		t.Errorf("OwnedBy = %v, want %v", got, want)
	}
}

// Against this machine's kernel: a socket this test process listens on is
// found by its process name, and not under another name.
func TestOwnedByOnThisMachine(t *testing.T) {
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	mine := Port{Proto: "tcp", IP: localhost4, Port: int(netip.MustParseAddrPort(ln.Addr().String()).Port())}
	got, err := OwnedBy("/proc", "/proc/net", []string{strings.TrimSpace(string(comm))})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, mine) {
		t.Errorf("OwnedBy(this process) = %v, want it to hold %v", got, mine)
	}
	got, err = OwnedBy("/proc", "/proc/net", []string{"containerd-not-here"})
	if err != nil || slices.Contains(got, mine) {
		t.Errorf("OwnedBy(another name) = %v, %v; want without %v", got, err, mine)
	}
}
