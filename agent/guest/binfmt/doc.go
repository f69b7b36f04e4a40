// Package binfmt registers the guest's handlers for foreign binaries:
// qemu-user-static's (left to the boot when it registers them) and
// Rosetta's, ahead of QEMU's for the same binaries.
package binfmt
