// Package hostaccess makes an address in the guest (host.docker.internal)
// reach the host's loopback: the address on lo, iptables redirecting it to
// the agent's listener, and each connection a stream to the host.
package hostaccess
