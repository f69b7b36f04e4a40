package hostagent

// watchShareFolders: the watch package's macOS backend (kqueue) needs a
// descriptor per file, which a shared home folder would exhaust; macOS
// needs an FSEvents watcher first (issue 15), so shares raise no inotify
// events there yet.
const watchShareFolders = false
