//go:build !darwin

package watchscope

// platformFolders: elsewhere only vmdock's own folders are left out.
func platformFolders(string) []Folder { return nil }
