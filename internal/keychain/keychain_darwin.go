package keychain

// securityPath is macOS's own keychain tool, by its full path: a
// `security` earlier on PATH must not be handed the user's passwords.
const securityPath = "/usr/bin/security"

// Find checks that the login keychains hold it, without reading its
// password (which may ask the user to allow it).
func Find(it Item) error {
	_, err := security(securityPath, it, false)
	return err
}

// Read returns its password from the user's keychains.
func Read(it Item) (string, error) { return security(securityPath, it, true) }

// AddHint is the command that stores it.
func AddHint(it Item) string {
	account := `"$USER"`
	if it.Account != "" {
		account = shellQuote(it.Account)
	}
	return "security add-generic-password -s " + shellQuote(it.Service) + " -a " + account + " -w"
}
