package filesync

// watchHostFolders: the sync engine's own watch on Linux covers only a
// few recently changed paths, so SyncMounts watches the host folders.
const watchHostFolders = true
