//go:build darwin && !cgo

package filesync

// shareWatchOff: without cgo the watch package falls back to kqueue,
// which needs a descriptor per file and would exhaust them on a shared
// home folder; shares raise no inotify events in such a build.
const shareWatchOff = "this vmdock was built without cgo, so without FSEvents"
