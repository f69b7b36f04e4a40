// Package idle tells whether the guest is idle: how many containers run,
// read from /proc whatever runtime started them.
package idle
