package ports

import (
	"os"
	"path/filepath"
	"testing"
)

const procNetHeader = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

// fakeListener is one line of a /proc/net/tcp table: a listener on
// hexAddr (as the kernel prints it) with inode.
func fakeListener(sl, hexAddr, inode string) string {
	return "   " + sl + ": " + hexAddr + " 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 " + inode + " 1 0 100 0 0 10 0\n"
}

// giveProcess adds a process to the fake /proc under root: its name, the
// agent's mount namespace, and the socket inodes it holds open.
func giveProcess(t *testing.T, root, pid, comm string, sockets ...string) {
	t.Helper()
	dir := filepath.Join(root, "proc", pid)
	must(t, os.MkdirAll(filepath.Join(dir, "fd"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "ns"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644))
	must(t, os.Symlink("mnt:[4026531841]", filepath.Join(dir, "ns", "mnt")))
	for i, s := range sockets {
		must(t, os.Symlink("socket:["+s+"]", filepath.Join(dir, "fd", string(rune('3'+i)))))
	}
}

// containerd's CRI streaming server listens on 127.0.0.1 and a random
// port: it is vmdock's own, not a port the user published, and the watch
// does not report it; a user's server on the same machine is reported.
func TestPortWatchSkipsTheRuntimesOwnListeners(t *testing.T) {
	w, _ := newTestWatch(t)
	procDir := filepath.Join(w.Root, "proc")
	netDir := filepath.Join(procDir, "net")
	must(t, os.MkdirAll(filepath.Join(procDir, "self", "ns"), 0o755))
	must(t, os.Symlink("mnt:[4026531841]", filepath.Join(procDir, "self", "ns", "mnt")))
	must(t, os.MkdirAll(netDir, 0o755))
	writeTCP := func(lines string) {
		must(t, os.WriteFile(filepath.Join(netDir, "tcp"), []byte(procNetHeader+lines), 0o644))
	}
	w.ProcNet = netDir
	writeTCP(fakeListener("0", "0100007F:9288", "5551") + // 127.0.0.1:37512
		fakeListener("1", "00000000:1F90", "7771")) // 0.0.0.0:8080
	giveProcess(t, w.Root, "412", "containerd", "5551")
	giveProcess(t, w.Root, "900", "nginx", "7771")

	list := w.lister()
	got, err := w.scan(list)
	must(t, err)
	if !got[key{Proto: "tcp", IP: "0.0.0.0", Port: 8080}] || len(got) != 1 {
		t.Errorf("ports = %v, want only 0.0.0.0:8080", got)
	}

	// dockerd starts later and listens too; the next scan leaves it out.
	writeTCP(fakeListener("0", "0100007F:9288", "5551") +
		fakeListener("1", "00000000:1F90", "7771") +
		fakeListener("2", "0100007F:0977", "6661")) // 127.0.0.1:2423
	giveProcess(t, w.Root, "500", "dockerd", "6661")
	got, err = w.scan(list)
	must(t, err)
	if !got[key{Proto: "tcp", IP: "0.0.0.0", Port: 8080}] || len(got) != 1 {
		t.Errorf("after dockerd: ports = %v, want only 0.0.0.0:8080", got)
	}
}
