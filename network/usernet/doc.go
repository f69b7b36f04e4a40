// Package usernet is the VM's user-mode network stack in the host agent: a
// gVisor netstack (gvisor-tap-vsock's switch and DHCP) that the hypervisor's
// NIC is plugged into over a socket, answering DHCP and DNS and relaying the
// guest's TCP and UDP to the host's own sockets.
//
// It keeps the addressing QEMU's slirp gives the guest (10.0.2.15 in
// 10.0.2.0/24, gateway and DNS 10.0.2.2, DNS also on 10.0.2.3), so the image
// needs no change whichever stack runs. It is IPv4-only.
package usernet
