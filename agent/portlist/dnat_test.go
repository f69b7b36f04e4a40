package portlist

import (
	"fmt"
	"os"
	"testing"
)

// testdata/iptables-save-nerdctl.txt is `iptables-save -t nat` from a
// vmdock guest (containerd runtime) running nerdctl containers published
// with -p 18090:80, -p 127.0.0.1:18091:81, -p 18092:81/udp and
// -p 18100-18102:9000-9002 (nerdctl v2.0.5, CNI portmap, iptables-nft 1.8.11),
// beside vmdock's host access chain.
func TestDNATFromCapturedGuest(t *testing.T) {
	b, err := os.ReadFile("testdata/iptables-save-nerdctl.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(DNAT(string(b)))
	want := "[{tcp 0.0.0.0 18090} {tcp 127.0.0.1 18091} {udp 0.0.0.0 18092} {tcp 0.0.0.0 18100} {tcp 0.0.0.0 18101} {tcp 0.0.0.0 18102}]"
	if got != want {
		t.Errorf("DNAT ports:\n got %s\nwant %s", got, want)
	}
}

func TestDNATSkipsWhatIsNotAPublishedPort(t *testing.T) {
	for _, line := range []string{
		"-A CNI-DN-1 -s 10.4.0.0/24 -p tcp -m tcp --dport 18090 -j CNI-HOSTPORT-SETMARK", // hairpin mark
		"-A DOCKER -p tcp -m tcp --dport 8080 -j DNAT --to-destination 172.17.0.2:80",    // not portmap's
		"-A CNI-DN-1 -d 10.0.0.0/8 -p tcp -m tcp --dport 1 -j DNAT --to-destination 10.4.0.3:80",
		"-A CNI-DN-1 -d 192.168.1.5/32 -p tcp -m tcp --dport 2 -j DNAT --to-destination 10.4.0.3:80", // not ours to bind
		"-A CNI-DN-1 -p sctp -m sctp --dport 3 -j DNAT --to-destination 10.4.0.3:80",
		"-A CNI-DN-1 -p tcp -m tcp --dport 1:65535 -j DNAT --to-destination 10.4.0.3:80", // a typo, not 65535 ports
		"-A CNI-DN-1 -p tcp -m tcp --dport 0 -j DNAT --to-destination 10.4.0.3:80",
		"-A CNI-DN-1 -p tcp -m tcp --dport x -j DNAT --to-destination 10.4.0.3:80",
		":CNI-DN-1 - [0:0]",
		"",
	} {
		if got := DNAT(line); len(got) != 0 {
			t.Errorf("%q gave %v", line, got)
		}
	}
	if got := fmt.Sprint(DNAT("-A CNI-DN-1 -d 127.0.0.1 -p tcp -m tcp --dport 7 -j DNAT --to-destination 10.4.0.3:80\n" +
		"-A CNI-DN-2 -p tcp -m tcp --dport 7 -j DNAT --to-destination 10.4.0.4:80\n" +
		"-A CNI-DN-2 -p tcp -m tcp --dport 7 -j DNAT --to-destination 10.4.0.4:80\n")); got != "[{tcp 0.0.0.0 7} {tcp 127.0.0.1 7}]" {
		t.Errorf("bare -d and duplicates: %s", got)
	}
}
