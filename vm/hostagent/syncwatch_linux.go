package hostagent

// watchHostFolders: the sync engine's own watch on Linux covers only a
// few recently changed paths, so the host agent watches the host folders.
const watchHostFolders = true
