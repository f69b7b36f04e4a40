//go:build darwin && cgo

package vz

/*
#cgo CFLAGS: -x objective-c -fno-objc-arc -mmacosx-version-min=11
#cgo LDFLAGS: -framework Virtualization -framework Foundation
#import <Virtualization/Virtualization.h>

// Code-Hex/vz does not wrap +[VZVirtualMachine isSupported].
static int vmdockVirtualizationSupported(void) {
	if (@available(macOS 11, *)) {
		return [VZVirtualMachine isSupported] ? 1 : 0;
	}
	return 0;
}
*/
import "C"

// VirtualizationSupported asks Virtualization.framework whether this Mac
// can run virtual machines at all. It cannot inside a macOS VM without
// nested virtualization (M1 and M2 hosts, GitHub's Apple silicon runners).
func VirtualizationSupported() (bool, error) {
	return C.vmdockVirtualizationSupported() != 0, nil
}
