// Package remotetest holds the real-parts test of a remote instance:
// Debian's openssh-server and docker.io's dockerd in a network namespace
// the test makes, the host agent (vm/hostagent) driving them over ssh.
package remotetest
