// Package containerd starts the containerd runtime in the guest, for
// nerdctl: containerd's configuration, nerdctl's host gateway, the guest's
// resolv.conf on the agent's DNS server, and BuildKit when the image has it.
package containerd
