//go:build !linux && !darwin

package qemu

import "errors"

func hostAccel() (string, error) { return "", errors.New("no hardware accelerator on this OS") }

func kernelRelease() string { return "unknown" }
