//go:build !linux

package qemu

// findVirtiofsd is always empty off Linux: virtiofsd and the memfd memory
// backend that vhost-user-fs needs are Linux-only, so shares use 9p there.
func findVirtiofsd() string { return "" }
