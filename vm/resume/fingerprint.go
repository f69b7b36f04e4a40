package resume

import (
	"fmt"
	"os"
	"time"
)

// Fingerprint is everything a saved state depends on. Two fingerprints
// that differ in any field mean the state must not be resumed.
type Fingerprint struct {
	Vmdock     string `json:"vmdock"`     // vmdock's version
	Agent      string `json:"agent"`      // sha256 of the guest agent binary
	Image      string `json:"image"`      // image digest
	Driver     string `json:"driver"`     // qemu, vz
	Hypervisor string `json:"hypervisor"` // its version (QEMU's, or macOS's)
	Accel      string `json:"accel"`      // the accelerator the VM ran on
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	MemoryMiB  int    `json:"memoryMiB"`
	DiskGiB    int    `json:"diskGiB"`
	Network    string `json:"network"`
	DiskSync   string `json:"diskSync"`
	Runtime    string `json:"runtime"`
	// Mounts is the mounts' canonical form (shares and sync mounts): the
	// guest's mount table depends on them.
	Mounts string `json:"mounts"`
	// CACerts and Proxy are hashes of the CA set and proxy the guest got:
	// its daemons read both only when they start.
	CACerts string `json:"caCerts"`
	Proxy   string `json:"proxy"`
	// Spec is the sha256 of the whole VM spec, for anything the named
	// fields miss (kernel command line, devices).
	Spec  string     `json:"spec"`
	Disks []DiskMark `json:"disks"`
}

// DiskMark identifies one disk file's content as of the save: a disk that
// was written, replaced or restored from a backup since has another
// modification time, change time or inode.
type DiskMark struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	ModNs    int64  `json:"modNs"`
	ChangeNs int64  `json:"changeNs"`
	Inode    uint64 `json:"inode"`
	Device   uint64 `json:"device"`
}

// MarkDisk reads path's mark; a missing disk is an error.
func MarkDisk(path string) (DiskMark, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return DiskMark{}, fmt.Errorf("disk %s: %w", path, err)
	}
	m := DiskMark{Path: path, Size: fi.Size(), ModNs: fi.ModTime().UnixNano()}
	fillStatMark(&m, fi)
	return m, nil
}

// MarkDisks marks each path; a disk that is missing marks as absent, which
// differs from any saved mark.
func MarkDisks(paths ...string) []DiskMark {
	marks := make([]DiskMark, 0, len(paths))
	for _, p := range paths {
		m, err := MarkDisk(p)
		if err != nil {
			m = DiskMark{Path: p, Size: -1}
		}
		marks = append(marks, m)
	}
	return marks
}

// Differs says how now differs from the saved fingerprint f, naming the
// first field that does, or "" when they match.
func (f Fingerprint) Differs(now Fingerprint) string {
	fields := []struct {
		name       string
		saved, now any
	}{
		{"vmdock version", f.Vmdock, now.Vmdock},
		{"guest agent", short(f.Agent), short(now.Agent)},
		{"image", short(f.Image), short(now.Image)},
		{"vmType", f.Driver, now.Driver},
		{"hypervisor version", f.Hypervisor, now.Hypervisor},
		{"accelerator", f.Accel, now.Accel},
		{"arch", f.Arch, now.Arch},
		{"cpus", f.CPUs, now.CPUs},
		{"memory (MiB)", f.MemoryMiB, now.MemoryMiB},
		{"disk (GiB)", f.DiskGiB, now.DiskGiB},
		{"network mode", f.Network, now.Network},
		{"diskSync", f.DiskSync, now.DiskSync},
		{"runtime", f.Runtime, now.Runtime},
		{"mounts", f.Mounts, now.Mounts},
		{"CA certificates", f.CACerts, now.CACerts},
		{"proxy", f.Proxy, now.Proxy},
	}
	for _, fd := range fields {
		if fd.saved != fd.now {
			switch fd.name {
			case "mounts":
				return "the mounts changed since the save"
			case "CA certificates", "proxy":
				return fmt.Sprintf("the host's %s changed since the save", fd.name)
			}
			return fmt.Sprintf("%s changed since the save (%v, now %v)", fd.name, fd.saved, fd.now)
		}
	}
	if f.Spec != now.Spec {
		return "the VM's devices or kernel command line changed since the save"
	}
	if len(f.Disks) != len(now.Disks) {
		return "the VM's disks changed since the save"
	}
	for i, d := range f.Disks {
		n := now.Disks[i]
		switch {
		case d.Path != n.Path:
			return fmt.Sprintf("disk %s replaced %s since the save", n.Path, d.Path)
		case n.Size < 0:
			return fmt.Sprintf("disk %s is gone", d.Path)
		case d != n:
			return fmt.Sprintf("disk %s was changed after the save (%s; written, replaced or restored)", d.Path, markChange(d, n))
		}
	}
	return ""
}

// short keeps digests readable in a one-line reason.
func short(digest string) string {
	if len(digest) > 19 {
		return digest[:19]
	}
	return digest
}

// markChange names what differs between two marks of one disk.
func markChange(saved, now DiskMark) string {
	switch {
	case saved.Size != now.Size:
		return fmt.Sprintf("size %d, now %d", saved.Size, now.Size)
	case saved.Inode != now.Inode || saved.Device != now.Device:
		return "another file"
	case saved.ModNs != now.ModNs:
		return "modified " + time.Unix(0, now.ModNs).Format(time.RFC3339Nano) + ", saved " + time.Unix(0, saved.ModNs).Format(time.RFC3339Nano)
	default:
		return "changed " + time.Unix(0, now.ChangeNs).Format(time.RFC3339Nano) + ", saved " + time.Unix(0, saved.ChangeNs).Format(time.RFC3339Nano)
	}
}
