package qemu

import "os/exec"

// virtiofsdCandidates are where distributions install the daemon: PATH,
// /usr/libexec (Rust virtiofsd on Debian 13, Fedora), /usr/lib/qemu (the
// legacy C daemon in Debian 12's qemu-system-common).
var virtiofsdCandidates = []string{"/usr/libexec/virtiofsd", "/usr/lib/virtiofsd", "/usr/lib/qemu/virtiofsd"}

// findVirtiofsd returns the first virtiofsd found, or "".
func findVirtiofsd() string {
	if p, err := exec.LookPath("virtiofsd"); err == nil {
		return p
	}
	for _, p := range virtiofsdCandidates {
		if fileExists(p) {
			return p
		}
	}
	return ""
}
