//go:build cgo

package doctor

// cgoEnabled: vz reaches Virtualization.framework through cgo, so a Mac
// build without it cannot run vz machines.
const cgoEnabled = true
