package hostcerts

// LinuxLocalDir is where Debian and Ubuntu keep the CAs an administrator
// added (update-ca-certificates reads it): the host's certificates beyond
// the distribution's stock roots.
const LinuxLocalDir = "/usr/local/share/ca-certificates"

func platformCerts() ([]Cert, error) { return FolderCerts(LinuxLocalDir) }
