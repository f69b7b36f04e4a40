// Package shares mounts the host's folders in the guest (9p, virtiofs,
// excluded folders kept on the data disk, the sync mounts' guest copies)
// and touches the files the host changed, so watchers in containers see it.
package shares
