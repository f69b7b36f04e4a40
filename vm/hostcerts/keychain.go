package hostcerts

import (
	"fmt"
	"strings"
)

// macOS keychains: what an administrator or an MDM profile added (a
// proxy's CA) lands in the System keychain, what the user added in their
// login keychain. Being there is not being trusted: a keychain also holds
// intermediates, expired and distrusted certificates. What the host
// trusts for SSL beyond its stock roots is in the user's and the admin's
// trust settings, which name certificates by SHA-1.
const (
	keychainSystem = "/Library/Keychains/System.keychain"
	keychainLogin  = "Library/Keychains/login.keychain-db" // under the home folder
)

// findCertificates runs `security find-certificate -a -p KEYCHAIN` and
// returns its output.
type findCertificates func(keychain string) ([]byte, error)

// exportTrustSettings runs `security trust-settings-export [-d] FILE`
// (admin: -d) and returns the plist written; nil when the domain has no
// trust settings.
type exportTrustSettings func(admin bool) ([]byte, error)

// keychainTool is how the certificates and their trust settings are read
// (the security command on macOS; fixtures in tests).
type keychainTool struct {
	find        findCertificates
	exportTrust exportTrustSettings
}

// keychainCerts is the CA certificates of the System and login keychains
// that the user's or admin trust settings trust for SSL. A keychain or a
// domain that cannot be read is left out (a user without a login
// keychain); an error is returned only when nothing could be read.
func keychainCerts(kt keychainTool, home string) ([]Cert, error) {
	var problems []string
	domains := map[bool]trustSettings{}
	for _, admin := range []bool{false, true} {
		source := trustSource(admin)
		b, err := kt.exportTrust(admin)
		if err == nil {
			domains[admin], err = parseTrustSettings(source, b)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", source, err))
		}
	}
	user, admin := domains[false], domains[true]
	if len(user) == 0 && len(admin) == 0 {
		if len(problems) > 0 {
			return nil, fmt.Errorf("read the trust settings: %s", strings.Join(problems, "; "))
		}
		return nil, nil
	}
	var out []Cert
	for _, kc := range []string{keychainSystem, strings.TrimSuffix(home, "/") + "/" + keychainLogin} {
		b, err := kt.find(kc)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", kc, err))
			continue
		}
		certs, err := parseLenient(kc, b)
		if err != nil {
			continue // an empty keychain
		}
		for _, c := range certs {
			if trustedForSSL(c, user, admin) {
				out = append(out, c)
			}
		}
	}
	if len(problems) > 0 && len(out) == 0 {
		return nil, fmt.Errorf("read the keychains: %s", strings.Join(problems, "; "))
	}
	return out, nil
}

func trustSource(admin bool) string {
	if admin {
		return "admin trust settings"
	}
	return "user trust settings"
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
