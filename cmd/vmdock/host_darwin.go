package main

import "golang.org/x/sys/unix"

// macOSVersion is the product version ("14.5"), or empty when the kernel
// does not say.
func macOSVersion() string {
	v, err := unix.Sysctl("kern.osproductversion")
	if err != nil {
		return ""
	}
	return v
}
