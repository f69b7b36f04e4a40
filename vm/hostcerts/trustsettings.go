package hostcerts

import (
	"bytes"
	"crypto/sha1"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// Values of kSecTrustSettingsResult.
const (
	trustResultUnspecified = 0 // none of a certificate's settings is for SSL
	trustResultRoot        = 1 // kSecTrustSettingsResultTrustRoot: a root, trusted
	trustResultAsRoot      = 2 // kSecTrustSettingsResultTrustAsRoot: a non-root, trusted as one
	trustResultDeny        = 3 // kSecTrustSettingsResultDeny
)

// sslPolicyOID is kSecPolicyAppleSSL (1.2.840.113635.100.1.3), as the
// kSecTrustSettingsPolicy data of an exported trust setting holds it.
var sslPolicyOID = []byte{0x2a, 0x86, 0x48, 0x86, 0xf7, 0x63, 0x64, 0x01, 0x03}

// trustSettings is one domain's (the user's or the admin's) verdict for
// SSL, by the certificate's SHA-1 in upper-case hex (the trustList key).
type trustSettings map[string]int

// parseTrustSettings reads what `security trust-settings-export` writes:
// a plist whose trustList maps each certificate's SHA-1 to its
// trustSettings array. Empty input is a domain without settings.
func parseTrustSettings(source string, b []byte) (trustSettings, error) {
	out := trustSettings{}
	if len(bytes.TrimSpace(b)) == 0 {
		return out, nil
	}
	v, err := parsePlist(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	top, _ := v.(map[string]any)
	list, ok := top["trustList"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: no trustList dictionary", source)
	}
	for key, entry := range list {
		e, _ := entry.(map[string]any)
		settings, ok := e["trustSettings"].([]any)
		if !ok {
			continue // no settings: verified like any other certificate
		}
		out[strings.ToUpper(key)] = sslResult(settings)
	}
	return out, nil
}

// sslResult folds a certificate's trust settings into one verdict for
// SSL, the way Apple documents them: an empty array is "always trust" (a
// root); a setting for another policy, or restricted to one host name or
// application, does not count; a setting without kSecTrustSettingsResult
// means TrustRoot. Several may apply; the first that trusts or denies
// decides, as Go's crypto/x509 once read them.
func sslResult(settings []any) int {
	if len(settings) == 0 {
		return trustResultRoot
	}
	for _, s := range settings {
		d, ok := s.(map[string]any)
		if !ok {
			continue
		}
		if p, ok := d["kSecTrustSettingsPolicy"]; ok {
			if oid, _ := p.([]byte); !bytes.Equal(oid, sslPolicyOID) {
				continue
			}
		}
		if _, ok := d["kSecTrustSettingsPolicyString"]; ok {
			continue
		}
		if _, ok := d["kSecTrustSettingsApplication"]; ok {
			continue
		}
		result := int64(trustResultRoot)
		if r, ok := d["kSecTrustSettingsResult"].(int64); ok {
			result = r
		}
		switch result {
		case trustResultRoot, trustResultAsRoot, trustResultDeny:
			return int(result)
		}
	}
	return trustResultUnspecified
}

// trustedForSSL says whether c is a CA the host trusts for SSL: the
// user's settings for it when there are any, else the admin's. TrustRoot
// counts for a self-signed certificate and TrustAsRoot for one that is
// not, as macOS applies them.
func trustedForSSL(c Cert, user, admin trustSettings) bool {
	key, selfSigned, err := certFacts(c)
	if err != nil {
		return false
	}
	result, ok := user[key]
	if !ok {
		result = admin[key]
	}
	switch result {
	case trustResultRoot:
		return selfSigned
	case trustResultAsRoot:
		return !selfSigned
	}
	return false
}

func certFacts(c Cert) (sha1Hex string, selfSigned bool, err error) {
	x, err := parseCert(c)
	if err != nil {
		return "", false, err
	}
	sum := sha1.Sum(x.Raw)
	return strings.ToUpper(hex.EncodeToString(sum[:])), bytes.Equal(x.RawIssuer, x.RawSubject), nil
}

func parseCert(c Cert) (*x509.Certificate, error) {
	blk, _ := pem.Decode(c.PEM)
	if blk == nil {
		return nil, errors.New("not PEM")
	}
	return x509.ParseCertificate(blk.Bytes)
}
