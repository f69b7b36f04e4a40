package hostcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

// Trust settings as `security trust-settings-export` writes them: the
// policy OIDs as data, the result as an integer.
const (
	settingSSLTrustRoot = `<dict>
				<key>kSecTrustSettingsPolicy</key>
				<data>
				KoZIhvdjZAED
				</data>
				<key>kSecTrustSettingsPolicyName</key>
				<string>sslServer</string>
				<key>kSecTrustSettingsResult</key>
				<integer>1</integer>
			</dict>`
	settingBasicX509TrustRoot = `<dict>
				<key>kSecTrustSettingsPolicy</key>
				<data>
				KoZIhvdjZAEC
				</data>
				<key>kSecTrustSettingsPolicyName</key>
				<string>basicX509</string>
				<key>kSecTrustSettingsResult</key>
				<integer>1</integer>
			</dict>`
	settingSMIMETrustRoot = `<dict>
				<key>kSecTrustSettingsPolicy</key>
				<data>
				KoZIhvdjZAEI
				</data>
				<key>kSecTrustSettingsPolicyName</key>
				<string>SMIME</string>
				<key>kSecTrustSettingsResult</key>
				<integer>1</integer>
			</dict>`
	settingSSLDeny = `<dict>
				<key>kSecTrustSettingsPolicy</key>
				<data>KoZIhvdjZAED</data>
				<key>kSecTrustSettingsPolicyName</key>
				<string>sslServer</string>
				<key>kSecTrustSettingsResult</key>
				<integer>3</integer>
			</dict>`
	settingSSLAsRoot = `<dict>
				<key>kSecTrustSettingsPolicy</key>
				<data>KoZIhvdjZAED</data>
				<key>kSecTrustSettingsResult</key>
				<integer>2</integer>
			</dict>`
	settingSSLUnspecified = `<dict>
				<key>kSecTrustSettingsAllowedError</key>
				<integer>-2147409654</integer>
				<key>kSecTrustSettingsPolicy</key>
				<data>KoZIhvdjZAED</data>
				<key>kSecTrustSettingsResult</key>
				<integer>4</integer>
			</dict>`
	settingSSLOneHost = `<dict>
				<key>kSecTrustSettingsPolicy</key>
				<data>KoZIhvdjZAED</data>
				<key>kSecTrustSettingsPolicyString</key>
				<string>registry.corp.example</string>
				<key>kSecTrustSettingsResult</key>
				<integer>1</integer>
			</dict>`
	settingSSLNoResult = `<dict>
				<key>kSecTrustSettingsPolicy</key>
				<data>KoZIhvdjZAED</data>
			</dict>`
	settingAnyPolicyDeny = `<dict>
				<key>kSecTrustSettingsResult</key>
				<integer>3</integer>
			</dict>`
)

// trustPlist is an exported trust settings file: each certificate's
// settings, "" for an empty array (always trust), "-" for none at all.
func trustPlist(t *testing.T, entries map[string]string) []byte {
	t.Helper()
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>trustList</key>
	<dict>
`)
	for key, settings := range entries {
		fmt.Fprintf(&b, `		<key>%s</key>
		<dict>
			<key>issuerName</key>
			<data>
			MBsxGTAXBgNVBAMMEENvcnAgUHJveHkgUm9vdA==
			</data>
			<key>modDate</key>
			<date>2025-03-14T09:26:53Z</date>
			<key>serialNumber</key>
			<data>
			AQ==
			</data>
`, key)
		if settings != "-" {
			fmt.Fprintf(&b, "\t\t\t<key>trustSettings</key>\n\t\t\t<array>\n\t\t\t%s\n\t\t\t</array>\n", settings)
		}
		b.WriteString("\t\t</dict>\n")
	}
	b.WriteString(`	</dict>
	<key>trustVersion</key>
	<integer>1</integer>
</dict>
</plist>
`)
	return []byte(b.String())
}

// sha1Key is how the trustList names a certificate.
func sha1Key(t *testing.T, pemBytes []byte) string {
	t.Helper()
	blk, _ := pem.Decode(pemBytes)
	sum := sha1.Sum(blk.Bytes)
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// newIntermediate makes a CA certificate issued by a new root (so not
// self-signed), PEM-encoded.
func newIntermediate(t *testing.T, name string) []byte {
	t.Helper()
	rootKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	root := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, root, &key.PublicKey, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestKeychainCertsTakesWhatTrustSettingsTrustForSSL(t *testing.T) {
	root := newCA(t, "root")
	inter := newIntermediate(t, "intermediate")
	tests := []struct {
		name        string
		cert        []byte
		user, admin string // the cert's settings in each domain; "-": none
		want        bool
	}{
		{"admin, added by security add-trusted-cert -d (mkcert)", root, "-", settingSSLTrustRoot + settingBasicX509TrustRoot, true},
		{"user, Always Trust (an empty array)", root, "", "-", true},
		{"admin, SSL without a result means TrustRoot", root, "-", settingSSLNoResult, true},
		{"admin, a deny for every policy", root, "-", settingAnyPolicyDeny, false},
		{"admin, S/MIME only", root, "-", settingSMIMETrustRoot, false},
		{"admin, basic X.509 only", root, "-", settingBasicX509TrustRoot, false},
		{"admin, SSL unspecified", root, "-", settingSSLUnspecified, false},
		{"admin, SSL for one host name only", root, "-", settingSSLOneHost + settingSMIMETrustRoot, false},
		{"user denies what admin trusts", root, settingSSLDeny, settingSSLTrustRoot, false},
		{"user trusts what admin does not mention", root, settingSSLUnspecified + settingSSLTrustRoot, "-", true},
		{"in a keychain, no trust settings", root, "-", "-", false},
		{"a listed certificate without settings", root, "", "-", true},
		{"an intermediate trusted as a root", inter, "-", settingSSLAsRoot, true},
		{"an intermediate given TrustRoot (roots only)", inter, "-", settingSSLTrustRoot, false},
		{"a root given TrustAsRoot (non-roots only)", root, settingSSLAsRoot, "-", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := newCA(t, "untouched") // in the keychain, never trusted
			domain := func(settings string) []byte {
				e := map[string]string{sha1Key(t, other): "-"}
				if settings != "-" {
					e[sha1Key(t, tt.cert)] = settings
				}
				return trustPlist(t, e)
			}
			kt := keychainTool{
				find: func(kc string) ([]byte, error) {
					if kc == keychainSystem {
						return append(append([]byte{}, tt.cert...), other...), nil
					}
					return nil, errors.New("no such keychain")
				},
				exportTrust: func(admin bool) ([]byte, error) {
					if admin {
						return domain(tt.admin), nil
					}
					return domain(tt.user), nil
				},
			}
			certs, err := keychainCerts(kt, "/Users/me")
			if err != nil && tt.want {
				t.Fatal(err)
			}
			got := len(certs) == 1 && certs[0].SHA256 == mustParse(t, tt.cert)[0].SHA256
			if got != tt.want || len(certs) > 1 {
				t.Errorf("took %d certificates (the one set: %v), want it taken: %v", len(certs), got, tt.want)
			}
		})
	}
}

func TestKeychainCertsReadsBothKeychains(t *testing.T) {
	corp, user, stray := newCA(t, "corp"), newCA(t, "user"), newCA(t, "stray")
	var asked []string
	kt := keychainTool{
		find: func(kc string) ([]byte, error) {
			asked = append(asked, kc)
			switch kc {
			case keychainSystem:
				// An odd entry does not spoil the rest.
				return append(append([]byte{}, corp...), "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"...), nil
			case "/Users/me/" + keychainLogin:
				return append(append([]byte{}, user...), stray...), nil
			}
			return nil, errors.New("unexpected keychain " + kc)
		},
		exportTrust: func(admin bool) ([]byte, error) {
			if admin {
				return trustPlist(t, map[string]string{sha1Key(t, corp): settingSSLTrustRoot}), nil
			}
			return trustPlist(t, map[string]string{strings.ToLower(sha1Key(t, user)): ""}), nil
		},
	}
	certs, err := keychainCerts(kt, "/Users/me/")
	if err != nil {
		t.Fatal(err)
	}
	got, want := newSet(certs), newSet(append(mustParse(t, corp), mustParse(t, user)...))
	if got.Hash() != want.Hash() {
		t.Errorf("got %s, want the corp and user CAs (asked %v)", got.Describe(), asked)
	}
}

func TestKeychainCertsWithoutTrustSettings(t *testing.T) {
	ca := newCA(t, "ca")
	find := func(string) ([]byte, error) { return ca, nil }
	none := func(bool) ([]byte, error) { return nil, nil }
	if certs, err := keychainCerts(keychainTool{find: find, exportTrust: none}, "/Users/me"); err != nil || len(certs) != 0 {
		t.Errorf("no trust settings: %d certs, %v; want none and no error", len(certs), err)
	}
	broken := func(admin bool) ([]byte, error) {
		if admin {
			return nil, errors.New("security: exit status 1")
		}
		return []byte("<plist><dict><key>trustList</key>"), nil
	}
	_, err := keychainCerts(keychainTool{find: find, exportTrust: broken}, "/Users/me")
	if err == nil || !strings.Contains(err.Error(), "admin trust settings: security: exit status 1") || !strings.Contains(err.Error(), "user trust settings: property list") {
		t.Errorf("unreadable trust settings: err = %v, want both domains named", err)
	}
}

func TestParsePlist(t *testing.T) {
	v, err := parsePlist([]byte(`<?xml version="1.0"?><plist version="1.0"><dict>
		<key>a</key><array><true/><false/><integer> -7 </integer><string>x &amp; y</string><data>AQID</data><real>1.5</real></array>
		<key>b</key><dict/></dict></plist>`))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%v", v)
	if want := "map[a:[true false -7 x & y [1 2 3] 1.5] b:map[]]"; got != want {
		t.Errorf("parsePlist = %s, want %s", got, want)
	}
	bad := map[string]string{
		"not a plist":     `<html></html>`,
		"key without one": `<plist><dict><key>a</key></dict></plist>`,
		"value for key":   `<plist><dict><string>a</string></dict></plist>`,
		"bad integer":     `<plist><integer>x</integer></plist>`,
		"bad data":        `<plist><data>!!</data></plist>`,
		"unknown element": `<plist><set/></plist>`,
		"cut short":       `<plist><dict><key>a</key><array>`,
		"too deep":        "<plist>" + strings.Repeat("<array>", 40) + strings.Repeat("</array>", 40) + "</plist>",
		"empty":           `<plist></plist>`,
	}
	for name, b := range bad {
		if _, err := parsePlist([]byte(b)); err == nil {
			t.Errorf("%s: parsePlist accepted %q", name, b)
		}
	}
}
