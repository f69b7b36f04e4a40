package images

import (
	"os"
	"path/filepath"
)

func platformCacheDirs() (dir, legacy string, err error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", "", err
	}
	lib := filepath.Join(home, "Library")
	return filepath.Join(lib, "Application Support", "vmdock"), filepath.Join(lib, "Caches", "vmdock"), nil
}
