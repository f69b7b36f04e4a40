package watchscope

func platformFolders(home string) []Folder { return macFolders(home) }
