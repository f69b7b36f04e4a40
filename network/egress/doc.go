// Package egress is a sandbox's outbound allowlist: the rules a user gives
// (host[:port], *.domain[:port], IPv4[:port]), the addresses the sandbox's
// DNS answered for allowed names (pinned: a connection is allowed to what
// the DNS said, never to what the guest claims a name resolves to), and
// the refusal log `vmdock sandbox log` reads. The network stack asks it
// about every new flow; it knows nothing of packets.
package egress
