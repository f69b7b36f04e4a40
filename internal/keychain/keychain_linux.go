package keychain

import (
	"errors"
	"os/exec"
)

// errNoSecretTool is a Linux host without libsecret's command-line tool.
var errNoSecretTool = errors.New("the keychain source needs secret-tool on Linux, which is not on PATH (Debian, Ubuntu: apt install libsecret-tools)")

// Find checks that the Secret Service holds it. The Secret Service has no
// lookup without the secret, so this reads it too, and drops it.
func Find(it Item) error {
	_, err := Read(it)
	return err
}

// Read returns its secret from the Secret Service (GNOME Keyring,
// KWallet) through secret-tool, the item found by its service attribute
// (and account, when given).
func Read(it Item) (string, error) {
	path, err := exec.LookPath("secret-tool")
	if err != nil {
		return "", errNoSecretTool
	}
	return secretTool(path, it)
}

// AddHint is the command that stores it.
func AddHint(it Item) string {
	cmd := "secret-tool store --label=" + shellQuote(it.Service) + " service " + shellQuote(it.Service)
	if it.Account != "" {
		cmd += " account " + shellQuote(it.Account)
	}
	return cmd
}
