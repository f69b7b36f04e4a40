//go:build darwin && cgo

package filesync

// shareWatchOff is empty: on macOS the watch package uses FSEvents, one
// stream per share whatever its size (vmdock's macOS build has cgo for vz).
const shareWatchOff = ""
