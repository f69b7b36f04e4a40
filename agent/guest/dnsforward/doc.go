// Package dnsforward is the guest's DNS server for containers: it answers
// host.docker.internal and the container domains with the host access IP
// and forwards the rest to the guest's resolvers, which it follows as DHCP
// names them; it also writes the guest's resolv.conf.
package dnsforward
