//go:build !linux && !darwin

package qemu

func nativeAccel() string { return AccelTCG }
