package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// RemoteKeyPath holds a remote instance's name on its server: the folder
// of its sync state there (~/.cache/vmdock/sync/<key>). A random part
// keeps two laptops' instances of one profile name apart.
func (i *Instance) RemoteKeyPath() string { return i.path("remote.key") }

// RemoteKey is the instance's name on its server, made on first use.
func (i *Instance) RemoteKey() (string, error) {
	if key, ok := i.RecordedRemoteKey(); ok {
		return key, nil
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("the instance's name on the server: %w", err)
	}
	key := i.Name + "-" + hex.EncodeToString(b)
	if err := atomicfile.WriteFile(i.RemoteKeyPath(), []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("record the instance's name on the server: %w", err)
	}
	return key, nil
}

// RecordedRemoteKey is the instance's name on its server, if it has one
// (a remote instance that started once).
func (i *Instance) RecordedRemoteKey() (string, bool) {
	b, err := os.ReadFile(i.RemoteKeyPath())
	if err != nil {
		return "", false
	}
	key := strings.TrimSpace(string(b))
	return key, key != ""
}
