package filesync

// watchHostFolders: on macOS the sync engine watches the host folders
// itself (FSEvents), recursively and cheaply.
const watchHostFolders = false
