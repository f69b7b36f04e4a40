package hostcerts

import (
	"fmt"
	"strings"
)

// macOS keychains: the stock roots ship in SystemRootCertificates; what
// an administrator or an MDM profile added (a proxy's CA) lands in the
// System keychain, and what the user added in their login keychain.
const (
	keychainRoots  = "/System/Library/Keychains/SystemRootCertificates.keychain"
	keychainSystem = "/Library/Keychains/System.keychain"
	keychainLogin  = "Library/Keychains/login.keychain-db" // under the home folder
)

// findCertificates runs `security find-certificate -a -p KEYCHAIN` and
// returns its output.
type findCertificates func(keychain string) ([]byte, error)

// keychainCerts is the certificates of the System and login keychains
// minus the stock roots. A keychain that cannot be read is left out (a
// user without a login keychain); when the stock roots cannot be read
// nothing is returned, since every root would then look added.
func keychainCerts(find findCertificates, home string) ([]Cert, error) {
	roots, err := find(keychainRoots)
	if err != nil {
		return nil, fmt.Errorf("read the stock roots (%s): %w", keychainRoots, err)
	}
	stock := map[string]bool{}
	if c, err := parseLenient(keychainRoots, roots); err == nil {
		for _, r := range c {
			stock[r.SHA256] = true
		}
	}
	var out []Cert
	var problems []string
	for _, kc := range []string{keychainSystem, strings.TrimSuffix(home, "/") + "/" + keychainLogin} {
		b, err := find(kc)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", kc, err))
			continue
		}
		certs, err := parseLenient(kc, b)
		if err != nil {
			continue // an empty keychain
		}
		for _, c := range certs {
			if !stock[c.SHA256] {
				out = append(out, c)
			}
		}
	}
	if len(problems) > 0 && len(out) == 0 {
		return nil, fmt.Errorf("read the keychains: %s", strings.Join(problems, "; "))
	}
	return out, nil
}

// parseLenient reads the certificates in security's output, skipping one
// that does not parse: a keychain may hold odd old certificates, and the
// rest are still worth trusting.
func parseLenient(source string, b []byte) ([]Cert, error) {
	var out []Cert
	for _, blk := range splitPEM(b) {
		c, err := Parse(source, blk)
		if err != nil {
			continue
		}
		out = append(out, c...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no certificate", source)
	}
	return out, nil
}

// splitPEM cuts b into one chunk per PEM block.
func splitPEM(b []byte) [][]byte {
	const begin = "-----BEGIN"
	s := string(b)
	var out [][]byte
	for {
		i := strings.Index(s, begin)
		if i < 0 {
			return out
		}
		s = s[i:]
		j := strings.Index(s[len(begin):], begin)
		if j < 0 {
			return append(out, []byte(s))
		}
		out = append(out, []byte(s[:len(begin)+j]))
		s = s[len(begin)+j:]
	}
}
