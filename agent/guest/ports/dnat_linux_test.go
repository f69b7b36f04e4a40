package ports

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

func TestPortWatchAddsDNATPorts(t *testing.T) {
	w, fos := newTestWatch(t)
	dir := t.TempDir()
	for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
		must(t, os.WriteFile(filepath.Join(dir, f), []byte("  sl  local_address rem_address   st\n"), 0o644))
	}
	w.ProcNet = dir
	fos.Outputs = map[string]string{"iptables-save -t nat": "*nat\n-A CNI-DN-1 -p tcp -m tcp --dport 18090 -j DNAT --to-destination 10.4.0.3:80\nCOMMIT\n"}
	list := w.lister()
	got, err := w.scan(list)
	must(t, err)
	if len(got) != 0 {
		t.Errorf("docker runtime reads DNAT rules: %v", got)
	}
	w.PublishDNAT()
	got, err = w.scan(list)
	must(t, err)
	if !got[key{Proto: "tcp", IP: "0.0.0.0", Port: 18090}] || len(got) != 1 {
		t.Errorf("ports = %v", got)
	}
}

// A nat table that cannot be read leaves the listening sockets reported,
// each scan, without the DNAT ports.
func TestPortWatchWithoutTheNatTable(t *testing.T) {
	w, fos := newTestWatch(t)
	w.ProcNet = t.TempDir()
	for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
		must(t, os.WriteFile(filepath.Join(w.ProcNet, f), []byte(procNetHeader), 0o644))
	}
	must(t, os.WriteFile(filepath.Join(w.ProcNet, "tcp"), []byte(procNetHeader+fakeListener("0", "00000000:1F90", "7771")), 0o644))
	fos.Results = map[string]error{"iptables-save": guestostest.ExitErr(1)}
	w.PublishDNAT()
	list := w.lister()
	for range 2 {
		got, err := w.scan(list)
		must(t, err)
		if !got[key{Proto: "tcp", IP: "0.0.0.0", Port: 8080}] || len(got) != 1 {
			t.Fatalf("ports = %v, want only 0.0.0.0:8080", got)
		}
	}
	if n := strings.Count(fos.Ran(), "iptables-save"); n != 2 {
		t.Errorf("nat table read %d times, want each scan", n)
	}
}
