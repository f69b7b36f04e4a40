// Package remotetest holds the real-parts test of a remote instance:
// Debian's openssh-server and docker.io's dockerd in a network namespace
// the test makes, driven over ssh by the real command line's
// `vmdock start --remote` and `vmdock stop`.
package remotetest
