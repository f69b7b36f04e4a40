// Package ports watches the guest's listening sockets and reports each one
// that opens or closes to the host, which forwards it: the agent's own and
// the runtime daemons' sockets left out, containerd's DNAT-published ports
// added, and a ticker that looks often while the host is busy with the
// guest and seldom when it is not.
package ports
