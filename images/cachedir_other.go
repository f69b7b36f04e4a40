//go:build !darwin

package images

import (
	"os"
	"path/filepath"
)

func platformCacheDirs() (dir, legacy string, err error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", "", err
	}
	return filepath.Join(base, "vmdock"), "", nil
}
