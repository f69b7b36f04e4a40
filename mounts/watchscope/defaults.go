package watchscope

import "path/filepath"

// Defaults are the folders every share watch leaves out on this OS: the
// OS's own busy folders under home, vmdock's home (each instance's disks
// and the host agent's own logs) and the image cache. An empty argument
// (not known) adds nothing. Each folder's Real is resolved.
func Defaults(home, vmdockHome, cacheDir string) []Folder {
	var fs []Folder
	if home != "" {
		fs = append(fs, platformFolders(home)...)
	}
	if vmdockHome != "" {
		fs = append(fs, Folder{Path: vmdockHome, Why: "vmdock's VM disks and logs"})
	}
	if cacheDir != "" {
		fs = append(fs, Folder{Path: cacheDir, Why: "vmdock's image cache"})
	}
	for i := range fs {
		fs[i].Real = Resolve(fs[i].Path)
	}
	return fs
}

// macFolders are macOS's: ~/Library holds apps' data, caches and logs,
// written all the time (and the image cache, ~/Library/Caches/vmdock), and
// vmdock's own files may live in ~/Library/Application Support/vmdock.
// Defined on every OS so that tests on Linux check it.
func macFolders(home string) []Folder {
	return []Folder{
		{Path: filepath.Join(home, "Library"), Why: "macOS apps' data, caches and logs"},
		{Path: filepath.Join(home, "Library", "Application Support", "vmdock"), Why: "vmdock's files"},
	}
}
