//go:build !linux

package memtrim

// NoHugePages has nothing to turn off here.
func NoHugePages() error { return nil }
