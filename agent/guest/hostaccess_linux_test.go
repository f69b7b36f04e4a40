package guest

import "testing"

func TestHostAccessRestore(t *testing.T) {
	const fresh = "*nat\n:VMDOCK-HOST - [0:0]\n" +
		"-A VMDOCK-HOST -d 10.0.0.1 -p tcp --dport 53 -j ACCEPT\n" +
		"-A VMDOCK-HOST -d 10.0.0.1 -p udp --dport 53 -j ACCEPT\n" +
		"-A VMDOCK-HOST -p tcp -d 10.0.0.1 -j REDIRECT --to-ports 4321\n" +
		"-I PREROUTING 1 -j VMDOCK-HOST\n-I OUTPUT 1 -j VMDOCK-HOST\nCOMMIT\n"
	if got := hostAccessRestore("10.0.0.1", 4321, true, "-P PREROUTING ACCEPT\n-P OUTPUT ACCEPT\n"); got != fresh {
		t.Errorf("fresh nat table:\n%s\nwant:\n%s", got, fresh)
	}
	// A second setup: the jumps are there (Docker's rules after them), so
	// only the chain is refilled.
	listing := "-P PREROUTING ACCEPT\n-N DOCKER\n-N VMDOCK-HOST\n" +
		"-A PREROUTING -j VMDOCK-HOST\n-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n" +
		"-A OUTPUT -j VMDOCK-HOST\n-A VMDOCK-HOST -p tcp -d 10.0.0.1 -j REDIRECT --to-ports 99\n"
	const again = "*nat\n:VMDOCK-HOST - [0:0]\n-A VMDOCK-HOST -p tcp -d 10.0.0.1 -j REDIRECT --to-ports 4321\nCOMMIT\n"
	if got := hostAccessRestore("10.0.0.1", 4321, false, listing); got != again {
		t.Errorf("jumps in place:\n%s\nwant:\n%s", got, again)
	}
	// A jump with a condition is not ours: ours is still added.
	got := hostAccessRestore("10.0.0.1", 4321, false, "-A OUTPUT -o lo -j VMDOCK-HOST\n-A PREROUTING -j VMDOCK-HOST\n")
	if want := "-I OUTPUT 1 -j VMDOCK-HOST\nCOMMIT\n"; got[len(got)-len(want):] != want {
		t.Errorf("conditional jump taken for ours:\n%s", got)
	}
}
