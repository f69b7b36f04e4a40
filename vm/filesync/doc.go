// Package filesync keeps an instance's files in step between the host and
// the guest, beside the shares themselves: SyncMounts runs the sync mounts
// (the engine in mounts/syncmount, a session per sync mount, the change
// watches that trigger its flushes), and ShareRelay passes host edits in
// shares on to the guest, which raises the inotify events virtiofs and 9p
// do not. The host agent builds both and calls them from its boot steps,
// its control API and its shutdown.
package filesync
