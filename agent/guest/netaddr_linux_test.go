package guest

import "testing"

func TestDefaultRouteInterface(t *testing.T) {
	// A vz guest with docker running: the NAT interface holds the default
	// route; docker0 and a bridge only their own subnets.
	table := `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
enp0s1	00000000	0140A8C0	0003	0	0	100	00000000	0	0	0
enp0s1	0040A8C0	00000000	0001	0	0	100	00FFFFFF	0	0	0
docker0	000011AC	00000000	0001	0	0	0	0000FFFF	0	0	0
br-1234	000012AC	00000000	0001	0	0	0	0000FFFF	0	0	0
`
	if got := defaultRouteInterface(table); got != "enp0s1" {
		t.Errorf("default route interface %q, want enp0s1", got)
	}
	isolated := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\ndocker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
	if got := defaultRouteInterface(isolated); got != "" {
		t.Errorf("isolated guest: %q, want no interface", got)
	}
}
