//go:build darwin && cgo

package hostagent

// watchShareFolders: on macOS the watch package uses FSEvents, one stream
// per share whatever its size (vmdock's macOS build has cgo for vz).
const watchShareFolders = true
