package guest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPortWatchAddsDNATPorts(t *testing.T) {
	s, fos := newTestServer(t)
	dir := t.TempDir()
	for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
		must(t, os.WriteFile(filepath.Join(dir, f), []byte("  sl  local_address rem_address   st\n"), 0o644))
	}
	s.ProcNet = dir
	fos.Outputs = map[string]string{"iptables-save -t nat": "*nat\n-A CNI-DN-1 -p tcp -m tcp --dport 18090 -j DNAT --to-destination 10.4.0.3:80\nCOMMIT\n"}
	list := s.portLister()
	got, err := s.scanPorts(list)
	must(t, err)
	if len(got) != 0 {
		t.Errorf("docker runtime reads DNAT rules: %v", got)
	}
	s.publishDNAT = true
	got, err = s.scanPorts(list)
	must(t, err)
	if !got[portKey{Proto: "tcp", IP: "0.0.0.0", Port: 18090}] || len(got) != 1 {
		t.Errorf("ports = %v", got)
	}
}
