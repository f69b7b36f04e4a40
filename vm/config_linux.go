package vm

import (
	"os"
	"os/exec"
	"runtime"
)

// virtiofsdPaths are where distributions install virtiofsd outside PATH
// (Debian's qemu 7.2 ships the legacy C daemon in /usr/lib/qemu).
var virtiofsdPaths = []string{"/usr/libexec/virtiofsd", "/usr/lib/qemu/virtiofsd"}

// CurrentHost describes this Linux machine; vz never exists here.
func CurrentHost() Host {
	return Host{OS: "linux", Arch: hostArch, CPUs: runtime.NumCPU(), Virtiofsd: findVirtiofsd()}
}

func findVirtiofsd() string {
	if p, err := exec.LookPath("virtiofsd"); err == nil {
		return p
	}
	for _, p := range virtiofsdPaths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}
