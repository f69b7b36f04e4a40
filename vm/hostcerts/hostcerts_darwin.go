package hostcerts

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func platformCerts() ([]Cert, error) {
	home, _ := os.UserHomeDir()
	return keychainCerts(keychainTool{find: security, exportTrust: securityTrustSettings}, home)
}

// securityTimeout bounds one run of the security tool.
const securityTimeout = 30 * time.Second

// security asks macOS's keychain tool for every certificate in keychain,
// PEM-encoded.
func security(keychain string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), securityTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "security", "find-certificate", "-a", "-p", keychain).Output()
	if err != nil {
		return nil, fmt.Errorf("security find-certificate -a -p %s: %w", keychain, err)
	}
	return out, nil
}

// securityTrustSettings exports the user's (or with admin the admin's)
// trust settings; a domain without any is nil, not an error.
func securityTrustSettings(admin bool) ([]byte, error) {
	dir, err := os.MkdirTemp("", "vmdock-trust-")
	if err != nil {
		return nil, fmt.Errorf("export trust settings: %w", err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "trust.plist")
	args := []string{"trust-settings-export"}
	if admin {
		args = append(args, "-d")
	}
	args = append(args, file)
	ctx, cancel := context.WithTimeout(context.Background(), securityTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "security", args...).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("No Trust Settings")) {
			return nil, nil
		}
		return nil, fmt.Errorf("security %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("security %s: %w", strings.Join(args, " "), err)
	}
	return b, nil
}
