package driver

import "time"

// AccelReport is what a QEMU start with accel auto would find for a guest
// of one arch on this host: `vmdock doctor` shows it. It lives here, not
// in vm/qemu, so doctor can read it without linking a driver.
type AccelReport struct {
	Binary     string // the qemu-system-* a start runs
	Version    string // its version ("8.2.2")
	MinVersion string // the oldest QEMU vmdock supports
	TooOld     bool   // Version is older than MinVersion
	Native     string // the hardware accelerator this OS offers (kvm, hvf); empty: none
	// DeviceError is why Native cannot even be opened (/dev/kvm's
	// permissions); empty when it opens, however the probe then goes.
	DeviceError string
	Accel       string // what auto runs under: Native, or tcg
	Reason      string // why auto would not use Native; empty when it does or there is none
	// FromCache is true when the verdict is one an earlier start or
	// doctor left, Checked when that was; otherwise the probe ran now.
	FromCache bool
	Checked   time.Time
}
