package syncmount

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// dataDirEnv is read by Mutagen on every access to its data directory.
const dataDirEnv = "MUTAGEN_DATA_DIRECTORY"

// ErrDataDirInUse is returned when a second Manager or Serve in the same
// process asks for a different Mutagen data directory than the one in use.
var ErrDataDirInUse = errors.New("a different Mutagen data directory is already in use in this process")

// dataDir guards the process-wide MUTAGEN_DATA_DIRECTORY: it may only change
// while nobody in this process is using Mutagen.
var dataDir struct {
	sync.Mutex
	path  string
	users int
}

// acquireDataDir points Mutagen at dir and holds it until release is called.
func acquireDataDir(dir string) (release func(), err error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("mutagen data directory %q: must be an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	dataDir.Lock()
	defer dataDir.Unlock()
	if dataDir.users > 0 && dataDir.path != dir {
		return nil, fmt.Errorf("%w: %s (wanted %s)", ErrDataDirInUse, dataDir.path, dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create mutagen data directory: %w", err)
	}
	if err := os.Setenv(dataDirEnv, dir); err != nil {
		return nil, fmt.Errorf("set %s: %w", dataDirEnv, err)
	}
	dataDir.path = dir
	dataDir.users++
	var once sync.Once
	return func() { once.Do(releaseDataDir) }, nil
}

func releaseDataDir() {
	dataDir.Lock()
	defer dataDir.Unlock()
	dataDir.users--
}
