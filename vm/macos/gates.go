package macos

// MinVZ is the oldest macOS vmdock runs vz on. 13 (Ventura) brings
// VZEFIBootLoader, VZLinuxRosettaDirectoryShare and
// VZGenericMachineIdentifier; macOS 12 would need a second, poorer vz path
// nobody can test.
var MinVZ = Version{13, 0}

// VZSupported reports whether the product version s can run vz machines;
// an empty or unreadable version (not macOS) cannot.
func VZSupported(s string) bool {
	v, err := Parse(s)
	return err == nil && !v.Less(MinVZ)
}

// MinRosettaCaching is where VZLinuxRosettaCachingOptions (Rosetta's
// ahead-of-time translation cache) appears.
var MinRosettaCaching = Version{14, 0}

// MinNestedVirtualization is where VZGenericPlatformConfiguration gains
// nestedVirtualizationEnabled; the chip must also be an M3 or newer, which
// only vz.IsNestedVirtualizationSupported can tell.
var MinNestedVirtualization = Version{15, 0}

// IntelPKUFixed is the first macOS whose vz boots Linux 6.12 and newer
// on Intel Macs. Earlier ones crash such a guest early in boot when its
// kernel has CONFIG_X86_INTEL_MEMORY_PROTECTION_KEYS (Debian, Ubuntu and
// Fedora kernels do): lima-vm/lima#3334, fixed in macOS 15.5.
var IntelPKUFixed = Version{15, 5}
