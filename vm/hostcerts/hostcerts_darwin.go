package hostcerts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"
)

func platformCerts() ([]Cert, error) {
	home, _ := os.UserHomeDir()
	return keychainCerts(security, home)
}

// security asks macOS's keychain tool for every certificate in keychain,
// PEM-encoded.
func security(keychain string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "security", "find-certificate", "-a", "-p", keychain).Output()
	if err != nil {
		return nil, fmt.Errorf("security find-certificate -a -p %s: %w", keychain, err)
	}
	return out, nil
}
