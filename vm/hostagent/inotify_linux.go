package hostagent

// watchShareFolders: on Linux, inotify watches a folder tree cheaply (one
// watch per folder).
const watchShareFolders = true
